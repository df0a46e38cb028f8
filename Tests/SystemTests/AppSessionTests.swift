import Foundation
import ReplayTesting
import Testing

/// Apps recording themselves through the OpenReplayKit library, from a test "app" process
/// (`replay-testapp`), against a real replayd on a private Xvfb and PulseAudio.
extension SystemTests {
    @Suite("App sessions through OpenReplayKit")
    struct AppSessionTests {
        /// One JSON line per step of the test app.
        typealias Line = [String: Any]

        /// Starts this environment's replayd with a fixed consent answer (no window in these tests), and
        /// a fixed picker answer (the service chosen) when `picker` is given.
        static func startReplayd(_ environment: TestEnvironment, consent: String, picker: String? = nil) async throws -> BackgroundProcess {
            let answers = ["--consent-answer-for-tests", consent] + (picker.map { ["--picker-answer-for-tests", $0] } ?? [])
            let replayd = try BackgroundProcess(try Binaries.replayd(), arguments: answers + ["--idle-exit", "0"],
                                                environment: environment.environment)
            for _ in 0..<250 {
                if FileManager.default.fileExists(atPath: environment.replaydSocket.path) { return replayd }
                if let result = replayd.result { throw HarnessError("replayd ended: \(result)") }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw HarnessError("replayd did not listen within 5 s: \(replayd.currentError)")
        }

        static func lines(_ output: String) -> [Line] {
            output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? Line }
        }

        /// Runs the test app with `steps` to completion; its lines.
        static func app(_ environment: TestEnvironment, _ steps: [String], overrides: [String: String?] = [:]) async throws -> [Line] {
            let result = try await ProcessRunner.run(try Binaries.testApp(), arguments: steps,
                                                     environment: environment.environment(with: overrides), timeout: .seconds(90))
            let lines = Self.lines(result.stdout)
            #expect(lines.count >= steps.count, "one line per step: \(result)")
            return lines
        }

        /// Starts the test app with `steps` in the background and returns once it has reported `step`
        /// (or ended, or `timeout` passed: the caller's expectations say what went wrong).
        static func startApp(_ environment: TestEnvironment, _ steps: [String], reporting step: String,
                             timeout: Duration = .seconds(60)) async throws -> BackgroundProcess {
            let app = try BackgroundProcess(try Binaries.testApp(), arguments: steps, environment: environment.environment)
            let deadline = ContinuousClock.now + timeout
            while !app.currentOutput.contains("\"step\":\"\(step)\""), app.isRunning, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            return app
        }

        static func line(_ lines: [Line], _ step: String) throws -> Line {
            try #require(lines.first { $0["step"] as? String == step }, "no line for \(step) in \(lines)")
        }

        static func code(_ line: Line) -> Int? { line["code"] as? Int }

        /// replayd's folder of apps' recordings in progress and kept for a preview.
        static func appRecordings(_ environment: TestEnvironment) -> [String] {
            let folder = environment.runtimeDirectory.appendingPathComponent("openreplaykit/app-recordings").path
            return (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        }

        @Test func badInputGivesReplayKitsErrors() async throws {
            try await TestEnvironment.with(.init(content: nil)) { environment in
                let replayd = try await Self.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
                let out = environment.outputPath("never.mp4")
                let lines = try await Self.app(environment, ["available", "stop", "stop-to=\(out)", "clip-export=\(out):20",
                                                             "clip-export=\(out):5", "clip-stop"])
                #expect(try Self.line(lines, "available")["available"] as? Bool == true)
                let stop = try Self.line(lines, "stop")
                #expect(Self.code(stop) == -5829, "attemptToStopNonRecording: \(stop)")
                #expect(stop["domain"] as? String == "com.apple.ReplayKit.RPRecordingErrorDomain")
                #expect((stop["description"] as? String)?.contains("not recording") == true)
                #expect(Self.code(try Self.line(lines, "stop-to=\(out)")) == -5829)
                #expect(Self.code(try Self.line(lines, "clip-export=\(out):20")) == -5834, "invalidParameter over 15 s")
                #expect(Self.code(try Self.line(lines, "clip-export=\(out):5")) == -5829, "nothing buffering")
                #expect(!FileManager.default.fileExists(atPath: out))

                // No display: unavailable, and a start fails without asking anyone.
                let headless = try await Self.app(environment, ["available", "start"], overrides: ["DISPLAY": nil])
                #expect(try Self.line(headless, "available")["available"] as? Bool == false)
                #expect(Self.code(try Self.line(headless, "start")) == -5803, "failedToStart")
                #expect(try await environment.replay(["privacy", "list"]).stdout.contains("no app"), "nobody was asked")
            }
        }

        @Test func declinedConsentIsUserDeclinedAndNothingIsCaptured() async throws {
            try await TestEnvironment.with(.init(content: nil)) { environment in
                let replayd = try await Self.startReplayd(environment, consent: "deny")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
                let lines = try await Self.app(environment, ["mic=on", "start", "clip-start", "available"])
                let start = try Self.line(lines, "start")
                #expect(Self.code(start) == -5801, "userDeclined: \(start)")
                #expect(start["domain"] as? String == "com.apple.ReplayKit.RPRecordingErrorDomain")
                #expect((start["description"] as? String)?.contains("replay-testapp") == true, "names the app: \(start)")
                #expect(Self.code(try Self.line(lines, "clip-start")) == -5801, "the answer is remembered")
                #expect(Self.appRecordings(environment).isEmpty)
                let sessions = try await environment.replay(["status"])
                #expect(sessions.stdout.contains("nothing is recording"), "\(sessions)")

                let list = try await environment.replay(["privacy", "list"])
                #expect(list.succeeded, "\(list)")
                #expect(list.stdout.contains("replay-testapp") && list.stdout.contains("not allowed"), "\(list.stdout)")
                let reset = try await environment.replay(["privacy", "reset", "replay-testapp"])
                #expect(reset.stdout.contains("forgot replay-testapp"), "\(reset)")
                #expect(try await environment.replay(["privacy", "list"]).stdout.contains("no app"))
                #expect(try await environment.replay(["privacy", "reset", "nobody"]).stdout.contains("no answer held for nobody"))
            }
        }

        @Test func isCapturedFollowsThePersonsRecordingAndAvailabilityToo() async throws {
            try await TestEnvironment.with(.init(content: nil)) { environment in
                let replayd = try await Self.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
                let app = try BackgroundProcess(try Binaries.testApp(), arguments: ["available", "watch-captured=12"],
                                                environment: environment.environment)
                for _ in 0..<200 where !app.currentOutput.contains("captured") { try await Task.sleep(for: .milliseconds(50)) }
                try await Task.sleep(for: .seconds(1))  // its availability request reaches replayd
                let record = try await environment.replay(["record", "--duration", "2", "-o", environment.outputPath("p.mp4")], timeout: .seconds(60))
                #expect(record.succeeded, "\(record)")
                let result = try await app.waitForExit(timeout: .seconds(30))
                let lines = Self.lines(result.stdout)
                let captured = lines.filter { $0["step"] as? String == "watch-captured=12" }.compactMap { $0["captured"] as? Bool }
                #expect(captured == [false, true, false], "\(result)")
                // The delegate heard that recording became unavailable while the person recorded, then available again.
                let availability = lines.filter { $0["step"] as? String == "availability-changed" }.compactMap { $0["available"] as? Bool }
                #expect(availability == [false, true], "\(result)")
            }
        }

        @Test func systemClipKeepsTheLastSecondsInBoundedMemory() async throws {
            try await TestEnvironment.with { environment in
                let start = try await environment.replay(["clip", "start", "--seconds", "10"])
                #expect(start.succeeded, "\(start)")
                try await Task.sleep(for: .seconds(6))
                let status = try await environment.replay(["status"])
                #expect(status.stdout.contains("clip buffer: keeping the last 0:10"), "\(status)")
                #expect(status.stdout.contains("MB of memory") || status.stdout.contains("kB of memory"), "\(status)")
                let out = environment.outputPath("clip.mp4")
                let save = try await environment.replay(["clip", "save", "--seconds", "3", "-o", out])
                #expect(save.succeeded, "\(save)")
                #expect(save.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == out)
                let info = try await MediaProbe.probe(out)
                let duration = try #require(info.format.duration)
                #expect(duration >= 2.5 && duration <= 6, "a 3 s clip from the keyframe before: \(duration) s")
                let again = try await environment.replay(["clip", "save", "-o", out])
                #expect(!again.succeeded && again.stderr.contains("already exists"), "\(again)")
                #expect(try await environment.replay(["clip", "save", "--seconds", "61"]).status != 0)
                let stop = try await environment.replay(["clip", "stop"])
                #expect(stop.succeeded, "\(stop)")
                #expect(try await environment.replay(["status"]).stdout.contains("nothing is recording"))
                #expect(!(try await environment.replay(["clip", "save", "-o", environment.outputPath("late.mp4")])).succeeded)
            }
        }
    }
}
