import Foundation
import ReplayTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension SystemTests {
    /// Issue 14.1: the video track lasts until the stop, and every duration ffprobe reports (the
    /// format's, each stream's, where each stream's last packet ends) is within one frame of the
    /// recorded time (what replayd reports as the elapsed time at the stop), however it ends.
    @Suite("the recording ends when it ends")
    struct RecordingEndTests {
        static let frame = 1.0 / 30

        /// The elapsed time of the last finished recording, from replayd's log.
        static func recordedSeconds(_ environment: TestEnvironment) throws -> Double {
            let log = try String(contentsOf: environment.runtimeDirectory.appendingPathComponent("openreplaykit/replayd.log"), encoding: .utf8)
            let line = try #require(log.split(separator: "\n").last { $0.contains("recording finished") && $0.contains("seconds=") }, "replayd logs the end: \(log.suffix(1500))")
            let value = try #require(line.firstMatch(of: /seconds=([0-9.]+)/), "the elapsed time in: \(line)")
            return try #require(Double(value.1))
        }

        /// Every duration in `file` within a frame of `recorded`, with `streams` streams.
        static func expectDurations(_ file: String, recorded: Double, streams count: Int) async throws {
            let (format, streams, packetEnds) = try await MediaProbe.durations(file)
            let all = "recorded \(recorded) s; ffprobe: format \(format ?? -1), streams \(streams.map { $0 ?? -1 }), packets end at \(packetEnds)"
            print("recording end: \(all)")
            #expect(streams.count == count, "\(all)")
            for value in [format] + streams + packetEnds.map(Optional.some) {
                let seconds = try #require(value, "every duration is stated: \(all)")
                #expect(abs(seconds - recorded) <= frame + 0.001, "within a frame of the recorded time: \(all)")
            }
        }

        @Test("--duration on a still screen, without sound: the video lasts the whole 6 s", .timeLimit(.minutes(2)))
        func durationStillScreen() async throws {
            try await TestEnvironment.with(.init(content: .init(mode: .still, audio: false))) { environment in
                let file = environment.outputPath("still.mp4")
                let result = try await environment.replay(["record", "-o", file, "--duration", "6", "--no-system-audio"], timeout: .seconds(45))
                try #require(result.succeeded, "\(result)")
                let recorded = try Self.recordedSeconds(environment)
                #expect(abs(recorded - 6) < 0.001, "--duration 6 records 6 s: \(recorded)")
                try await Self.expectDurations(file, recorded: recorded, streams: 1)
                // The last picture is the still screen, shown to the end.
                let last = try await FrameDecoder.frame(at: recorded - 0.1, in: file)
                #expect(barMismatches(in: last, tolerance: 40) == [])
            }
        }

        @Test("--duration with sound on a screen that goes still halfway", .timeLimit(.minutes(2)))
        func durationStillHalfway() async throws {
            try await TestEnvironment.with { environment in
                let file = environment.outputPath("halfway.mp4")
                let recorder = try environment.startReplay(["record", "-o", file, "--duration", "7"])
                _ = try await waitUntilRecording(environment, background: recorder)
                try await Task.sleep(for: .seconds(3))
                await environment.content?.stop()
                let result = try await recorder.waitForExit(timeout: .seconds(45))
                try #require(result.succeeded, "\(result)")
                let recorded = try Self.recordedSeconds(environment)
                #expect(abs(recorded - 7) < 0.001)
                try await Self.expectDurations(file, recorded: recorded, streams: 2)
            }
        }

        @Test("`replay stop` on a still screen with sound", .timeLimit(.minutes(2)))
        func stopStillScreen() async throws {
            try await TestEnvironment.with(.init(content: .init(mode: .still, audio: true))) { environment in
                let file = environment.outputPath("stopped.mp4")
                let recorder = try environment.startReplay(["record", "-o", file])
                _ = try await waitUntilRecording(environment, background: recorder)
                try await Task.sleep(for: .seconds(4.5))
                let stop = try await environment.replay(["stop"], timeout: .seconds(30))
                #expect(stop.succeeded && stop.stdout.contains(file), "\(stop)")
                let result = try await recorder.waitForExit(timeout: .seconds(30))
                #expect(result.succeeded, "\(result)")
                try await Self.expectDurations(file, recorded: try Self.recordedSeconds(environment), streams: 2)
            }
        }

        @Test("Ctrl-C (SIGINT to `replay record`) on a screen that goes still halfway, without sound", .timeLimit(.minutes(2)))
        func interruptStillHalfway() async throws {
            try await TestEnvironment.with(.init(content: .init(audio: false))) { environment in
                let file = environment.outputPath("interrupted.mp4")
                let recorder = try environment.startReplay(["record", "-o", file, "--no-system-audio"])
                _ = try await waitUntilRecording(environment, background: recorder)
                try await Task.sleep(for: .seconds(2.5))
                await environment.content?.stop()
                try await Task.sleep(for: .seconds(2.7))
                recorder.signal(SIGINT)
                let result = try await recorder.waitForExit(timeout: .seconds(30))
                #expect(result.succeeded, "\(result)")
                try await Self.expectDurations(file, recorded: try Self.recordedSeconds(environment), streams: 1)
            }
        }
    }
}
