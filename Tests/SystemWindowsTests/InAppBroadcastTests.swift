import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemWindowsTests {
    /// An app's own broadcast (`RPBroadcastActivityViewController`, `RPBroadcastController`) and the
    /// system picker shown from an app (`RPSystemBroadcastPickerView`), end to end on a desktop with a
    /// window manager: a real replayd shows the real picker and pairing prompt, answered with keys;
    /// the seed's SampleHandler (`replay-testextension`, installed) notes what it receives.
    @Suite
    struct InAppBroadcastTests {
        static let seedID = "org.openreplaykit.test.seed"

        /// Installs the test extension as the "Seed Service" where replayd looks ($HOME/.local/share here).
        static func installSeed(_ environment: TestEnvironment) throws -> URL {
            let folder = environment.homeDirectory.appendingPathComponent(".local/share/openreplaykit/extensions/\(seedID).orkextension")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Binaries.copyExecutable(from: try Binaries.path("replay-testextension"), to: folder.appendingPathComponent("seed-upload").path)
            let manifest = #"{"identifier": "\#(seedID)", "displayName": "Seed Service", "kind": "broadcast-upload", "executable": "seed-upload"}"#
            try Data(manifest.utf8).write(to: folder.appendingPathComponent("manifest.json"))
            return folder
        }

        static func events(in folder: URL) -> [String] {
            ((try? String(contentsOf: folder.appendingPathComponent("events.log"), encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init)
        }

        static func waitFor(_ what: String, timeout: Duration = .seconds(30), _ condition: () -> Bool) async throws {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if condition() { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw HarnessError("timed out waiting for \(what)")
        }

        static func startReplayd(_ environment: TestEnvironment) async throws -> BackgroundProcess {
            let replayd = try BackgroundProcess(try Binaries.replayd(), arguments: ["--idle-exit", "0"], environment: environment.environment)
            for _ in 0..<250 where !FileManager.default.fileExists(atPath: environment.replaydSocket.path) {
                try await Task.sleep(for: .milliseconds(20))
            }
            return replayd
        }

        static func lines(_ output: String) -> [[String: Any]] {
            output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        /// Waits for the pairing prompt, reads its question, answers it with `key`.
        static func answerPairing(_ desktop: Desktop, replayd: BackgroundProcess, key: String) async throws -> String {
            let prompt = try await desktop.waitForWindow(classNamed: "openreplaykit-consent", of: replayd)
            try await desktop.waitForFocus(prompt)
            let question = try await desktop.xdotool(["getwindowname", prompt])
            try await desktop.xdotool(["key", key])
            return question
        }

        /// The app (`replay-testapp`, its window a blue child at 100,100) picks the seed service, is
        /// asked, broadcasts; another application's red window overlaps it and never reaches the
        /// extension; when that application takes the focus the broadcast pauses by itself and the app
        /// resumes it; the extension's URL and service info reach the app's delegate. A second start
        /// asks again, and a declined third one is `userDeclined`.
        @Test(.timeLimit(.minutes(4)))
        func anAppBroadcastsOnlyItselfPausesOnFocusLossAndIsAskedEveryTime() async throws {
            try await Desktop.with { desktop in
                let environment = desktop.environment
                let folder = try Self.installSeed(environment)
                let replayd = try await Self.startReplayd(environment)
                defer { replayd.signal(SIGTERM) }
                // Another application: red, over part of where the app's window will be.
                let other = try BackgroundProcess("xmessage", arguments: ["-name", "otherapp", "-bg", "red", "-fg", "red",
                                                                          "-geometry", "300x300+250+150", "another application"],
                                                  environment: environment.environment)
                defer { other.signal(SIGTERM) }
                let window = "child=" + [try Binaries.testContent(), "--app", "300x300+100+100", "--colour", "0000ff", "--no-audio"].joined(separator: "|")
                let app = try BackgroundProcess(try Binaries.testApp(), arguments: [
                    window, "broadcast-load=\(Self.seedID)", "broadcast-start", "broadcast-wait-info=30", "broadcast-wait-paused=60",
                    "broadcast-resume", "sleep=3", "broadcast-finish", "broadcast-start", "sleep=1", "broadcast-finish", "broadcast-start",
                ], environment: environment.environment)
                defer { app.signal(SIGTERM) }

                // The picker offers the preferred service; Return chooses it.
                let picker = try await desktop.waitForWindow(classNamed: "openreplaykit-picker", of: replayd)
                try await desktop.waitForFocus(picker)
                try await Task.sleep(for: .milliseconds(300))
                try await desktop.xdotool(["key", "Return"])
                let firstQuestion = try await Self.answerPairing(desktop, replayd: replayd, key: "Return")
                #expect(firstQuestion.contains("replay-testapp") && firstQuestion.contains("Seed Service"), "the prompt names the app and the service: \(firstQuestion)")

                try await Self.waitFor("the app's blue window at the extension") { Self.events(in: folder).contains { $0.hasPrefix("colour blue") } }
                let status = try await environment.replay(["status"])
                #expect(status.stdout.contains("broadcasting itself to \(Self.seedID)"), "\(status)")
                // The app has the focus, then the other application takes it: the broadcast pauses by itself.
                try await desktop.xdotool(["search", "--onlyvisible", "--classname", "replay-testapp", "windowactivate", "--sync"])
                try await Task.sleep(for: .seconds(1))
                #expect(!Self.events(in: folder).contains("paused"), "the app's own focus does not pause it: \(Self.events(in: folder))")
                try await desktop.xdotool(["search", "--onlyvisible", "--classname", "otherapp", "windowactivate", "--sync"])
                try await Self.waitFor("the pause on focus loss") { Self.events(in: folder).contains("paused") }
                // The app resumes (with the red window now over its own): the extension hears it.
                try await Self.waitFor("the app's resume") { Self.events(in: folder).contains("resumed") }
                try await Self.waitFor("the first broadcast's end") { Self.events(in: folder).contains("finished") }

                let secondQuestion = try await Self.answerPairing(desktop, replayd: replayd, key: "Return")
                #expect(secondQuestion == firstQuestion, "asked again, the same words: \(secondQuestion)")
                do {
                    try await Self.waitFor("the second broadcast's end") { Self.events(in: folder).filter { $0 == "finished" }.count == 2 }
                } catch {
                    let log = environment.replaydLog
                    Issue.record("app: \(app.currentOutput)\n\(app.currentError.suffix(2000))\nevents: \(Self.events(in: folder))\nreplayd: \(log.suffix(4000))")
                    throw error
                }
                let thirdQuestion = try await Self.answerPairing(desktop, replayd: replayd, key: "Escape")
                #expect(thirdQuestion == firstQuestion)

                let result = try await app.waitForExit(timeout: .seconds(60))
                let lines = Self.lines(result.stdout)
                func line(_ step: String, _ index: Int = 0) -> [String: Any] {
                    let matching = lines.filter { $0["step"] as? String == step }
                    return index < matching.count ? matching[index] : [:]
                }
                #expect(line("broadcast-load=\(Self.seedID)")["extension"] as? String == Self.seedID, "\(lines)")
                #expect(line("broadcast-load=\(Self.seedID)")["service"] as? String == "Seed Service")
                #expect(line("broadcast-start")["broadcasting"] as? Bool == true, "\(lines)")
                let info = line("broadcast-wait-info=30")
                #expect((info["url"] as? String)?.hasPrefix("https://seed.example/watch/") == true, "the URL reached the delegate: \(info)")
                #expect((info["info"] as? String)?.contains("viewers=3") == true, "the service info reached the delegate: \(info)")
                #expect(line("broadcast-wait-paused=60")["paused"] as? Bool == true, "the app saw isPaused: \(lines)")
                #expect(line("broadcast-resume")["paused"] as? Bool == false, "\(lines)")
                #expect(line("broadcast-finish")["broadcasting"] as? Bool == false, "\(lines)")
                #expect(line("broadcast-start", 1)["ok"] as? Bool == true, "the second start: \(lines)")
                #expect(line("broadcast-start", 2)["code"] as? Int == -5801, "declined: userDeclined: \(lines)")

                let events = Self.events(in: folder)
                #expect(!events.contains { $0.hasPrefix("colour red") }, "another application's window never reaches the extension: \(events)")
                #expect(events.contains("annotated replay-testapp"), "the extension knows which app it carries: \(events)")
                let order = ["started", "first picture", "colour blue", "paused", "resumed", "finished"].map { key in
                    events.firstIndex { $0.hasPrefix(key) } ?? -1
                }
                #expect(!order.contains(-1) && order == order.sorted(), "in order: \(events)")
                #expect(events.filter { $0.hasPrefix("started") }.count == 2, "two broadcasts, none for the declined start: \(events)")
            }
        }

        /// The system picker from an app: the person's broadcast of the whole screen, which the app does
        /// not own (it goes on after the app has left, until `replay stop`); without the microphone button
        /// it has no microphone.
        @Test(.timeLimit(.minutes(3)))
        func theSystemPickerFromAnAppStartsThePersonsBroadcast() async throws {
            try await Desktop.with { desktop in
                let environment = desktop.environment
                let folder = try Self.installSeed(environment)
                let replayd = try await Self.startReplayd(environment)
                defer { replayd.signal(SIGTERM) }
                let app = try BackgroundProcess(try Binaries.testApp(), arguments: ["system-picker=\(Self.seedID),no-mic"],
                                                environment: environment.environment)
                defer { app.signal(SIGTERM) }
                let picker = try await desktop.waitForWindow(classNamed: "openreplaykit-picker", of: replayd)
                try await desktop.waitForFocus(picker)
                try await Task.sleep(for: .milliseconds(300))
                // Space would switch the microphone on, were its button shown.
                try await desktop.xdotool(["key", "space"])
                try await desktop.xdotool(["key", "Return"])
                let result = try await app.waitForExit(timeout: .seconds(60))
                let lines = Self.lines(result.stdout)
                #expect(lines.first?["ok"] as? Bool == true && lines.first?["extension"] as? String == Self.seedID, "\(result)")

                // The app has left; the person's broadcast goes on, of the whole screen.
                try await Self.waitFor("the broadcast's first picture") { Self.events(in: folder).contains { $0.hasPrefix("first picture 1280x720") } }
                try await Task.sleep(for: .seconds(1))
                let status = try await environment.replay(["status"])
                #expect(status.stdout.contains("broadcasting to \(Self.seedID)"), "\(status)")
                #expect(try await environment.replay(["stop"]).succeeded)
                try await Self.waitFor("the end") { Self.events(in: folder).contains("finished") }
                #expect(!Self.events(in: folder).contains { $0.hasPrefix("first mic audio") }, "no microphone: \(Self.events(in: folder))")
            }
        }
    }
}
