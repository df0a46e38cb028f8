import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// `replay toggle`, what the desktop entry and a shortcut run: it starts a recording and returns
    /// at once (the recording goes on in replayd), and the next one stops it.
    @Suite("replay toggle")
    struct ToggleTests {
        @Test("toggle starts and returns, the recording runs on, toggle stops it; --stop with nothing recording says so",
              .timeLimit(.minutes(2)))
        func startThenStop() async throws {
            try await TestEnvironment.with(.init(content: .init(mode: .still, audio: false))) { environment in
                let started = ContinuousClock.now
                let start = try await environment.replay(["toggle", "--notify"], timeout: .seconds(30))
                try #require(start.succeeded, "\(start)")
                #expect(ContinuousClock.now - started < .seconds(10), "toggle returns once the recording runs")
                let file = start.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                #expect(file.hasPrefix(environment.environment["XDG_VIDEOS_DIR"] ?? "?") && file.hasSuffix(".mp4"),
                        "the default file in the Videos folder: \(start)")
                _ = try await waitUntilRecording(environment)
                try await Task.sleep(for: .seconds(2))
                let again = try await environment.replay(["toggle", "--start"], timeout: .seconds(30))
                #expect(again.succeeded && again.stderr.contains("running already"), "\(again)")
                #expect((try await recordingElapsed(environment)) > 1.5, "the recording ran on after toggle left")

                let stop = try await environment.replay(["toggle", "--notify"], timeout: .seconds(30))
                #expect(stop.succeeded && stop.stdout.contains(file), "\(stop)")
                let info = try await MediaProbe.probe(file, countFrames: false)
                #expect(info.videoStreams.count == 1 && (info.format.duration ?? 0) > 2, "the movie: \(info.format)")

                let nothing = try await environment.replay(["toggle", "--stop"], timeout: .seconds(30))
                #expect(nothing.succeeded && nothing.stderr.contains("Nothing is recording"), "\(nothing)")
            }
        }

        @Test("an error is reported and exits 1: toggle without a display", .timeLimit(.minutes(1)))
        func errorWithoutDisplay() async throws {
            try await TestEnvironment.with(.init(content: nil)) { environment in
                let result = try await environment.replay(["toggle", "--notify"], environment: ["DISPLAY": nil], timeout: .seconds(30))
                #expect(result.status == 1 && result.stderr.contains("neither WAYLAND_DISPLAY nor DISPLAY is set"), "\(result)")
            }
        }
    }
}
