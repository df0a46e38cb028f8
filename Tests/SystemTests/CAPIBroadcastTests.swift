import Foundation
import ReplayTesting
import Testing

extension SystemTests.CAPITests {
    /// The app's own broadcast through the C API, from Python (ctypes): start (replayd answers the
    /// picker and the pairing prompt with its test answers), the extension's URL, pause, resume, finish.
    @Test("Python through ctypes broadcasts itself to the seed's extension", .timeLimit(.minutes(3)))
    func pythonBroadcastsThroughCtypes() async throws {
        let library = Binaries.directory.appendingPathComponent("libopenreplaykit.so").path
        try await TestEnvironment.with(.init(content: nil)) { environment in
            let seed = SystemTests.BroadcastTests.seedID
            let folder = try SystemTests.BroadcastTests.installSeed(in: environment.homeDirectory.appendingPathComponent(".local/share"))
            let replayd = try await SystemTests.AppSessionTests.startReplayd(environment, consent: "allow", picker: seed)
            defer { replayd.signal(SIGTERM) }
            let run = try await ProcessRunner.run("/usr/bin/python3", arguments: [Self.programs.appendingPathComponent("capi_broadcast.py").path, library, seed],
                                                  environment: environment.environment, timeout: .seconds(120))
            try #require(run.succeeded, "\(run)")
            let line = try #require(SystemTests.AppSessionTests.lines(run.stdout).first, "\(run)")
            func code(_ key: String) -> Int? { (line[key] as? [String: Any])?["code"] as? Int }
            #expect(code("start") == 0 && line["broadcasting"] as? Bool == true, "\(line)")
            #expect((line["url"] as? String)?.hasPrefix("https://seed.example/watch/") == true, "\(line)")
            #expect(code("pause") == 0 && line["paused"] as? Bool == true, "\(line)")
            #expect(code("resume") == 0 && line["pausedAfterResume"] as? Bool == false, "\(line)")
            #expect(code("finish") == 0 && line["broadcastingAfterFinish"] as? Bool == false, "\(line)")
            #expect(code("finishAgain") == -5829, "attemptToStopNonRecording: \(line)")
            let events = SystemTests.BroadcastTests.events(in: folder)
            let order = ["started", "first picture", "paused", "resumed", "finished"].map { key in events.firstIndex { $0.hasPrefix(key) } ?? -1 }
            #expect(!order.contains(-1) && order == order.sorted(), "\(events)")
        }
    }
}
