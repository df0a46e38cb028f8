import Foundation
import ReplayTesting
import Testing

extension SystemWindowsTests {
    /// The privacy model end to end, as a person meets it: an app's first start makes replayd show
    /// the consent prompt on the display (a real replayd, no test answer), the person's key decides,
    /// and the answer holds for the app's next start without asking again.
    @Suite
    struct ConsentThroughReplaydTests {
        @Test(arguments: [("Return", true), ("Escape", false)])
        func anAppsFirstStartAsksThePersonAndTheAnswerHolds(key: String, allowed: Bool) async throws {
            try await Desktop.with { desktop in
                let environment = desktop.environment
                let replayd = try BackgroundProcess(try Binaries.replayd(), arguments: ["--idle-exit", "0"], environment: environment.environment)
                for _ in 0..<250 where !FileManager.default.fileExists(atPath: environment.replaydSocket.path) {
                    try await Task.sleep(for: .milliseconds(20))
                }
                let out = environment.outputPath("consented.mp4")
                let window = "child=" + [try Binaries.testContent(), "--app", "200x200+50+50", "--colour", "0000ff", "--no-audio"].joined(separator: "|")
                // The second start comes without a key press: it succeeds (or is refused) only if the answer is held.
                let app = try BackgroundProcess(try Binaries.testApp(), arguments: [window, "start", "sleep=1", "stop-to=\(out)", "start", "discard"],
                                                environment: environment.environment)
                let prompt = try await desktop.waitForWindow(classNamed: "openreplaykit-consent", of: replayd)
                try await desktop.waitForFocus(prompt)
                try await desktop.xdotool(["key", key])
                let result = try await app.waitForExit(timeout: .seconds(60))
                _ = await replayd.terminate(grace: .seconds(5))
                let lines = result.stdout.split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
                let starts = lines.filter { $0["step"] as? String == "start" }
                try #require(starts.count == 2, "two starts: \(result)")
                if allowed {
                    #expect(starts.allSatisfy { $0["ok"] as? Bool == true }, "allowed, and the second start needs no answer: \(starts)")
                    let info = try await MediaProbe.probe(out)
                    #expect(info.videoStreams.count == 1, "the app's recording was made")
                } else {
                    #expect(starts.allSatisfy { $0["code"] as? Int == -5801 }, "userDeclined, held for the second start: \(starts)")
                    #expect(!FileManager.default.fileExists(atPath: out), "nothing was recorded")
                }
            }
        }
    }
}
