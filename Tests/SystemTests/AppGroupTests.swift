import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemTests {
    /// `RPAppGroup` in an app's process (`replay-testapp group-set/group-get`): in the Secret Service
    /// of a private session bus (dbus-daemon and GNOME Keyring, unlocked headless), read back by
    /// `secret-tool`; in the 0600 file without a bus or with `ORK_APP_GROUP_STORE=file`.
    @Suite("RPAppGroup: the Secret Service, else the file")
    struct AppGroupTests {
        @Test("With a Secret Service on the session bus the secret is a keyring item; without one, the file", .timeLimit(.minutes(1)))
        func secretServiceThenFile() async throws {
            let root = try makeTemporaryDirectory(prefix: "ork-keyring")
            defer { try? FileManager.default.removeItem(at: root) }
            let runtime = root.appendingPathComponent("run")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let dataHome = root.appendingPathComponent("data").path
            let bus = "unix:path=\(runtime.path)/bus"
            let plain = ["HOME": root.path, "XDG_RUNTIME_DIR": runtime.path, "XDG_DATA_HOME": dataHome, "PATH": "/usr/bin:/bin"]
            var withBus = plain
            withBus["DBUS_SESSION_BUS_ADDRESS"] = bus

            let daemon = try BackgroundProcess("dbus-daemon", arguments: ["--session", "--nofork", "--address=\(bus)"], environment: withBus)
            defer { daemon.signal(SIGTERM) }
            let deadline = ContinuousClock.now + .seconds(10)
            while !FileManager.default.fileExists(atPath: runtime.path + "/bus") {
                guard ContinuousClock.now < deadline, daemon.isRunning else { throw HarnessError("dbus-daemon did not start: \(daemon.currentError)") }
                try await Task.sleep(for: .milliseconds(50))
            }
            // The login keyring, made and unlocked with a password on stdin, as a login manager does.
            let unlock = try await ProcessRunner.run("/bin/sh", arguments: ["-c", "printf ork-test | gnome-keyring-daemon --unlock --components=secrets"],
                                                     environment: withBus, timeout: .seconds(20))
            #expect(unlock.succeeded, "\(unlock)")
            do {
                let set = try await ProcessRunner.run(try Binaries.testApp(), arguments: ["group-set=org.example.stream:streamKey:kr-secret-1"],
                                                      environment: withBus, timeout: .seconds(30))
                #expect(set.succeeded, "\(set)")
                #expect(set.stdout.contains(#""store":"secret-service""#) && set.stdout.contains(#""value":"kr-secret-1""#), "\(set)")
                let lookup = try await ProcessRunner.run("secret-tool", arguments: ["lookup", "openreplaykit-group", "org.example.stream", "key", "streamKey"],
                                                         environment: withBus, timeout: .seconds(20))
                #expect(lookup.stdout == "kr-secret-1", "the keyring holds it: \(lookup)")
                #expect(!FileManager.default.fileExists(atPath: dataHome + "/openreplaykit/app-groups"), "no file beside the keyring")
                let other = try await ProcessRunner.run(try Binaries.testApp(), arguments: ["group-get=org.example.other:streamKey"],
                                                        environment: withBus, timeout: .seconds(30))
                #expect(other.succeeded && !other.stdout.contains("kr-secret-1"), "another group has none of it: \(other)")

                // Told to use the file, or with no bus (none named, none at $XDG_RUNTIME_DIR/bus): the file,
                // which has none of the keyring's secrets.
                var forced = withBus
                forced["ORK_APP_GROUP_STORE"] = "file"
                var noBus = plain
                noBus["XDG_RUNTIME_DIR"] = root.path
                for environment in [forced, noBus] {
                    let get = try await ProcessRunner.run(try Binaries.testApp(), arguments: ["group-get=org.example.stream:streamKey"],
                                                          environment: environment, timeout: .seconds(30))
                    let answer = get.stdout.replacingOccurrences(of: "\\/", with: "/")
                    #expect(get.succeeded && answer.contains(#""store":"file:\#(dataHome)/openreplaykit/app-groups/org.example.stream/secrets.json""#)
                            && !answer.contains("kr-secret-1"), "\(get)")
                }
            } catch {
                await ProcessTable.terminate(ProcessTable.pids(withEnvironment: "DBUS_SESSION_BUS_ADDRESS", equalTo: bus), grace: .seconds(1))
                throw error
            }
            // gnome-keyring-daemon (started by the unlock and by D-Bus) goes with the bus.
            await ProcessTable.terminate(ProcessTable.pids(withEnvironment: "DBUS_SESSION_BUS_ADDRESS", equalTo: bus), grace: .seconds(1))
        }
    }
}
