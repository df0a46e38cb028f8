import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemTests {
    /// `replay broadcast --service org.openreplaykit.reference` (Extensions/Reference, found beside
    /// `replay` in the build folder) to a real `broadcast-service`: the viewer page plays in headless
    /// Chromium, a viewer's comment reaches `replay status`, and refusals reach the person in words.
    @Suite("replay broadcast: the reference-service extension")
    struct ReferenceExtensionTests {
        static let serviceID = "org.openreplaykit.reference"

        static func extensionLog(_ environment: TestEnvironment) -> String {
            let url = environment.runtimeDirectory.appendingPathComponent("openreplaykit/extension-\(serviceID).log")
            return String(((try? String(contentsOf: url, encoding: .utf8)) ?? "").suffix(3000))
        }

        /// The extension's own memory (what replayd's limit counts: `Private_Dirty`), in kB, found by its program's name.
        static func extensionFootprint() -> Int? {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
            for entry in entries where Int32(entry) != nil {
                guard let command = try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8),
                      command.hasPrefix("replay-extensio"),
                      let line = ((try? String(contentsOfFile: "/proc/\(entry)/cmdline", encoding: .utf8)) ?? "").split(separator: "\0").first,
                      line.hasSuffix("replay-extension-reference"),
                      let rollup = try? String(contentsOfFile: "/proc/\(entry)/smaps_rollup", encoding: .utf8) else { continue }
                for row in rollup.split(separator: "\n") where row.hasPrefix("Private_Dirty:") {
                    return Int(row.split(separator: " ").dropFirst().first ?? "")
                }
            }
            return nil
        }

        @Test("Broadcast through the reference extension: the page plays in Chromium, a comment reaches replay status, the app in front is the broadcast's",
              .timeLimit(.minutes(4)), .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")))
        func broadcastToService() async throws {
            let service = try await BroadcastServiceServer.start()
            do {
                try await broadcast(to: service)
            } catch {
                Issue.record("service log: \(service.log.suffix(3000))")
                await service.stop()
                throw error
            }
            await service.stop()
        }

        private func broadcast(to service: BroadcastServiceServer) async throws {
            try await service.createUser("streamer", password: "streamer-password-1")
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                let env: [String: String?] = ["XDG_DATA_HOME": environment.directory.appendingPathComponent("data").path]
                let listed = try await environment.replay(["services"], environment: env)
                #expect(listed.stdout.contains(Self.serviceID), "found beside replay in the build folder: \(listed)")

                // A desktop's window manager (replayd follows the focus through it).
                let windowManager = try BackgroundProcess("openbox", arguments: ["--sm-disable"], environment: environment.environment)
                defer { windowManager.signal(SIGTERM) }
                let started = ContinuousClock.now
                // The password on standard input, never on the command line (every user reads that).
                let secrets = environment.directory.appendingPathComponent("reference-setup")
                try "# the account\nuser=streamer\npassword=streamer-password-1\n".write(to: secrets, atomically: true, encoding: .utf8)
                let broadcast = try environment.startReplay(["broadcast", "--service", Self.serviceID, "--setup", "server=\(service.baseURL)",
                                                             "--setup-file", "-", "--setup", "title=Reference extension test"],
                                                            environment: env, standardInput: secrets.path)
                let commandLine = (try? String(contentsOfFile: "/proc/\(broadcast.pid)/cmdline", encoding: .utf8)) ?? ""
                #expect(commandLine.contains("--setup-file") && !commandLine.contains("streamer-password-1"), "\(commandLine)")
                try await BroadcastTests.waitFor("the page URL on stdout") {
                    broadcast.currentOutput.contains(service.baseURL + "/b/") || !broadcast.isRunning
                }
                let page = try #require(broadcast.currentOutput.split(separator: "\n").first { $0.hasPrefix(service.baseURL + "/b/") }.map(String.init),
                                        "replay: \(broadcast.currentError) extension: \(Self.extensionLog(environment))")
                let id = String(page.dropFirst((service.baseURL + "/b/").count))
                // Live at the service: the first picture reached the ingest.
                var live = false
                while !live, ContinuousClock.now - started < .seconds(20) {
                    live = (try? await service.json("/api/v1/broadcasts/\(id)"))?["live"] as? Bool ?? false
                    if !live { try await Task.sleep(for: .milliseconds(20)) }
                }
                let toLive = ContinuousClock.now - started
                #expect(live, "the broadcast went live: \(Self.extensionLog(environment))")
                print("reference extension: replay broadcast → live at the service in \(toLive) (debug build, loaded machine)")
                let object = try await service.json("/api/v1/broadcasts/\(id)")
                #expect(object["title"] as? String == "Reference extension test", "\(object)")
                #expect(object["broadcaster"] as? String == "streamer", "\(object)")

                // An application comes to the front (the window manager says which): the broadcast moves to it.
                let app = try BackgroundProcess("xmessage", arguments: ["-name", "front", "in front"], environment: environment.environment)
                defer { app.signal(SIGTERM) }
                var application: [String: Any] = [:]
                let moveDeadline = ContinuousClock.now + .seconds(20)
                while ContinuousClock.now < moveDeadline {
                    application = (try? await service.json("/api/v1/broadcasts/\(id)"))?["application"] as? [String: Any] ?? [:]
                    if application["id"] as? String == "xmessage" { break }
                    try await Task.sleep(for: .milliseconds(200))
                }
                #expect(application["id"] as? String == "xmessage", "the broadcast follows the app in front: \(application)\n\(Self.extensionLog(environment))")

                let chromium = try Chromium(directory: environment.directory)
                defer { chromium.stop() }
                let base = service.baseURL
                try await chromium.withPage { page in
                    // A viewer with an account (chat needs one).
                    try await page.navigate(base + "/signup")
                    _ = try await page.evaluate("""
                        document.querySelector('input[name=name]').value = 'viewer';
                        document.querySelector('input[name=password]').value = 'viewer-password-1';
                        document.querySelector('form.card').submit(); true
                        """)
                    try await page.waitFor("location.pathname === '/account' && document.readyState === 'complete'")
                    // The page plays: frames drawn one after another.
                    try await page.navigate(base + "/b/\(id)")
                    try await page.waitFor("window.orkPlayer && orkPlayer.framesDrawn > 15", timeout: 30)
                    let drawn0 = Int(try await page.evaluate("orkPlayer.framesDrawn")) ?? 0
                    try await Task.sleep(for: .seconds(2))
                    let drawn1 = Int(try await page.evaluate("orkPlayer.framesDrawn")) ?? 0
                    #expect(drawn1 - drawn0 > 20, "frames drawn: \(drawn0) → \(drawn1)")
                    #expect(try await page.evaluate("orkPlayer.error") == "null")
                    try await page.screenshot(to: URL(fileURLWithPath: environment.outputPath("reference-page.png")))
                    // A comment from the page, with escape sequences that would clear the broadcaster's
                    // terminal and retitle its window if printed as they are.
                    _ = try await page.evaluate("""
                        document.querySelector('#chat-form input[name=text]').value = 'hello from the viewer page\\u001b[2J\\u001b]0;owned\\u0007';
                        document.querySelector('#chat-form button').click(); true
                        """)
                    try await page.waitFor("document.querySelectorAll('#chat li').length >= 1")
                }
                // The comment and the viewer come back as service info.
                var status = ""
                let deadline = ContinuousClock.now + .seconds(15)
                while ContinuousClock.now < deadline {
                    status = try await environment.replay(["status"], environment: env).stdout
                    if status.contains("lastComment=viewer: hello from the viewer page") { break }
                    try await Task.sleep(for: .milliseconds(200))
                }
                #expect(status.contains("service info:") && status.contains("lastComment=viewer: hello from the viewer page")
                        && status.contains("comments=1"), "\(status)\nextension: \(Self.extensionLog(environment))")
                #expect(status.contains("broadcast URL: \(page)"), "\(status)")
                if let footprint = Self.extensionFootprint() {
                    print("reference extension: Private_Dirty \(footprint / 1024) MB at 640x480 (debug build)")
                }

                let stop = try await environment.replay(["stop"], environment: env)
                #expect(stop.succeeded, "\(stop)")
                let ended = try await broadcast.waitForExit(timeout: .seconds(20))
                #expect(ended.succeeded, "\(ended)")
                #expect(ended.stderr.contains("replay: service: ") && ended.stderr.contains("lastComment=viewer: hello from the viewer page"),
                        "replay prints the service info as it changes: \(ended.stderr)")
                // The viewer's escape sequences are shown, not obeyed.
                let escapedComment = #"hello from the viewer page\e[2J\e]0;owned\u{7}"#
                #expect(status.contains(escapedComment) && ended.stderr.contains(escapedComment), "\(status)\n\(ended.stderr)")
                #expect(!status.contains("\u{1B}") && !ended.stderr.contains("\u{1B}") && !ended.stderr.contains("\u{7}"),
                        "no control character from the service reaches the terminal")
                // The publish ended: the broadcast is over at the service.
                var over = false
                for _ in 0..<50 where !over {
                    over = (try? await service.json("/api/v1/broadcasts/\(id)"))?["live"] as? Bool == false
                    if !over { try await Task.sleep(for: .milliseconds(200)) }
                }
                #expect(over, "the broadcast ended at the service")
            }
        }

        @Test("The stream key a sign-in gave is kept in the app group: the next broadcast needs no password and no sign-in; another password is still checked by the service",
              .timeLimit(.minutes(3)))
        func streamKeyKept() async throws {
            let service = try await BroadcastServiceServer.start()
            do {
                try await service.createUser("streamer", password: "streamer-password-1")
                try await TestEnvironment.with(TestEnvironment.Configuration(width: 320, height: 240)) { environment in
                    let env: [String: String?] = ["XDG_DATA_HOME": environment.directory.appendingPathComponent("data").path]
                    let server = "server=\(service.baseURL)"
                    /// A broadcast with `setup` until its page URL is printed, then `replay stop`.
                    func broadcastOnce(_ setup: [String]) async throws {
                        let broadcast = try environment.startReplay(["broadcast", "--service", Self.serviceID] + setup.flatMap { ["--setup", $0] },
                                                                    environment: env)
                        try await BroadcastTests.waitFor("the page URL on stdout") {
                            broadcast.currentOutput.contains(service.baseURL + "/b/") || !broadcast.isRunning
                        }
                        #expect(broadcast.currentOutput.contains(service.baseURL + "/b/"),
                                "replay: \(broadcast.currentError) extension: \(Self.extensionLog(environment))")
                        _ = try await environment.replay(["stop"], environment: env)
                        let ended = try await broadcast.waitForExit(timeout: .seconds(20))
                        #expect(ended.succeeded, "\(ended)")
                    }
                    func signIns() -> Int { service.log.components(separatedBy: "Stream key created by API sign-in").count - 1 }

                    try await broadcastOnce([server, "user=streamer", "password=streamer-password-1"])
                    #expect(signIns() == 1, "\(service.log.suffix(2000))")
                    // No password: the kept key.
                    try await broadcastOnce([server, "user=streamer"])
                    // The same password again: the kept key too (no bcrypt on the service, no new key).
                    try await broadcastOnce([server, "user=streamer", "password=streamer-password-1"])
                    #expect(signIns() == 1, "the kept key was used, no new sign-in: \(service.log.suffix(2000))")
                    #expect(Self.extensionLog(environment).contains("signed in with the stream key kept from the last sign-in"),
                            "\(Self.extensionLog(environment))")
                    // Another password is not taken on trust: the service refuses it.
                    let wrong = try await environment.replay(["broadcast", "--service", Self.serviceID, "--setup", server, "--setup", "user=streamer",
                                                              "--setup", "password=not-the-password"], environment: env, timeout: .seconds(60))
                    #expect(!wrong.succeeded && wrong.stderr.contains("Wrong account or password."), "\(wrong)")
                    // Another account with no password and nothing kept: said in words.
                    let other = try await environment.replay(["broadcast", "--service", Self.serviceID, "--setup", server, "--setup", "user=somebody"],
                                                             environment: env, timeout: .seconds(60))
                    #expect(!other.succeeded && other.stderr.contains("Not signed in to \(service.baseURL) as somebody")
                            && other.stderr.contains("--setup password="), "\(other)")
                }
            } catch {
                await service.stop()
                throw error
            }
            await service.stop()
        }

        enum Refusal: String, CaseIterable, CustomTestStringConvertible, Sendable {
            case wrongPassword, unknownServer, noAccount
            var testDescription: String { rawValue }
        }

        @Test("A wrong password, a server that is not there and a missing account end the broadcast in words, with a non-zero exit",
              .timeLimit(.minutes(2)), arguments: Refusal.allCases)
        func refused(_ refusal: Refusal) async throws {
            let service = try await BroadcastServiceServer.start()
            do {
                try await service.createUser("streamer", password: "streamer-password-1")
                try await TestEnvironment.with(TestEnvironment.Configuration(width: 320, height: 240)) { environment in
                    let env: [String: String?] = ["XDG_DATA_HOME": environment.directory.appendingPathComponent("data").path]
                    let setup: [String]
                    let words: [String]
                    switch refusal {
                    case .wrongPassword:
                        setup = ["server=\(service.baseURL)", "user=streamer", "password=not-the-password"]
                        words = ["Wrong account or password.", "HTTP 401", service.baseURL]
                    case .unknownServer:
                        // A port nobody listens on (the service's RTMP port, closed by stopping the service is racy: port 1).
                        setup = ["server=http://127.0.0.1:1", "user=streamer", "password=streamer-password-1"]
                        words = ["cannot reach the broadcast service at http://127.0.0.1:1", "--setup server="]
                    case .noAccount:
                        setup = ["server=\(service.baseURL)"]
                        words = ["Not signed in", "--setup user="]
                    }
                    let result = try await environment.replay(["broadcast", "--service", Self.serviceID] + setup.flatMap { ["--setup", $0] },
                                                              environment: env, timeout: .seconds(60))
                    #expect(!result.succeeded, "\(result)")
                    for word in words {
                        #expect(result.stderr.contains(word), "\(word) in \(result.stderr)")
                    }
                    #expect(ProcessTable.isAlive(environment.replaydPID() ?? -1), "replayd goes on")
                }
            } catch {
                await service.stop()
                throw error
            }
            await service.stop()
        }
    }
}
