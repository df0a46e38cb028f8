import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemTests {
    /// SIGTERM to replayd in the middle of a recording and a broadcast: it finishes the file, lets
    /// the upload extension leave (killing one that does not within its grace period), and exits 0
    /// with nothing left behind: no extension process, no thread (the process is gone), a movie
    /// ffprobe decodes to its end.
    @Suite("replayd's graceful shutdown")
    struct ShutdownTests {
        /// `behave`: the seed extension's behaviour (`BroadcastSession.swift`): `nice` leaves when told
        /// to finish; `hang` blocks in processSampleBuffer and must be killed.
        @Test("SIGTERM during a recording and a broadcast: replayd exits 0, its extension is gone, the movie is whole",
              .timeLimit(.minutes(3)), arguments: ["nice", "hang"])
        func sigtermLeavesNothingBehind(behave: String) async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                let seed = BroadcastTests.seedID
                // replayd reads the extensions of its own environment: $HOME/.local/share here.
                let folder = try BroadcastTests.installSeed(in: environment.homeDirectory.appendingPathComponent(".local/share"))
                let replayd = try await AppSessionTests.startReplayd(environment, consent: "allow")
                defer { replayd.signal(SIGKILL) }

                let file = environment.outputPath("shutdown.mp4")
                let recorder = try environment.startReplay(["record", "-o", file])
                _ = try await waitUntilRecording(environment, background: recorder)
                let broadcast = try environment.startReplay(["broadcast", "--service", seed, "--setup", behave == "nice" ? "login=yes" : "behave=\(behave)"])
                let awaited = behave == "hang" ? "hanging" : "first picture"
                try await BroadcastTests.waitFor("the extension's \(awaited)") {
                    BroadcastTests.events(in: folder).contains { $0.hasPrefix(awaited) }
                }
                let extensions = ProcessTable.pids(withEnvironment: "ORK_EXTENSION_IDENTIFIER", equalTo: seed)
                    .filter { ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: environment.runtimeDirectory.path).contains($0) }
                let extensionPID = try #require(extensions.first, "the extension's process runs: events \(BroadcastTests.events(in: folder)); replayd: \(replayd.currentError.suffix(3000))")
                // A second of recording beside the broadcast, then the signal.
                try await Task.sleep(for: .seconds(1))

                let asked = ContinuousClock.now
                replayd.signal(SIGTERM)
                // The grace period (5 s) for an extension that does not leave, a tick of its watch, and the file.
                let result = try await replayd.waitForExit(timeout: .seconds(20))
                let took = ContinuousClock.now - asked
                print("replayd (\(behave) extension) exited \(took) after SIGTERM: \(result)")
                #expect(result.succeeded, "replayd exits 0 after SIGTERM: \(result); \(replayd.currentError.suffix(3000))")
                #expect(!ProcessTable.isAlive(extensionPID),
                        "the extension (pid \(extensionPID)) is gone once replayd has exited; its events: \(BroadcastTests.events(in: folder))")
                if behave == "nice" {
                    #expect(BroadcastTests.events(in: folder).contains("finished"), "the extension was told the broadcast finished")
                }
                #expect(took < .seconds(behave == "nice" ? 10 : 15), "replayd left in \(took)")
                #expect(!FileManager.default.fileExists(atPath: environment.replaydSocket.path), "the socket is removed")

                // The clients hear the end and leave by themselves.
                _ = try await recorder.waitForExit(timeout: .seconds(15))
                _ = try await broadcast.waitForExit(timeout: .seconds(15))

                // Complete: every frame decodes, and the movie lasts as long as it was recorded.
                let info = try await MediaProbe.probe(file)
                let video = try #require(info.videoStreams.first, "the movie has its video track")
                #expect((video.readFrames ?? 0) > 0, "its frames decode: \(video)")
                let times = try await MediaProbe.videoFrameTimes(file)
                #expect((times.max() ?? 0) >= 1, "the movie plays past its first second: \(times.count) frames, last at \(times.max() ?? 0) s")
                #expect(!info.audioStreams.isEmpty, "and has its sound")
            }
        }
    }
}
