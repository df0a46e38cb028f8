import Foundation
import ReplayTesting
import Testing

/// An app's own broadcast without windows (replayd answers the picker and the pairing prompt with its
/// test answers): the person's broadcast takes over, and the app's delegate hears why. The picker,
/// the prompt and the pause on focus loss are tested with real windows in
/// `SystemWindowsTests.InAppBroadcastTests`.
extension SystemTests.AppSessionTests {
    @Test func thePersonsBroadcastEndsTheAppsBroadcastAndItsDelegateHearsIt() async throws {
        try await TestEnvironment.with { environment in
            let seed = SystemTests.BroadcastTests.seedID
            // replayd reads the extensions of its own environment: $HOME/.local/share here.
            let folder = try SystemTests.BroadcastTests.installSeed(in: environment.homeDirectory.appendingPathComponent(".local/share"))
            let replayd = try await Self.startReplayd(environment, consent: "allow", picker: seed)
            defer { replayd.signal(SIGTERM) }
            let app = try await Self.startApp(environment, [try Self.window(), "broadcast-load", "broadcast-start", "broadcast-wait-ended=60"],
                                                         reporting: "broadcast-start")
            defer { Task { await app.terminate() } }
            let started = Self.lines(app.currentOutput).first { $0["step"] as? String == "broadcast-start" }
            let log = environment.replaydLog
            try #require(started?["broadcasting"] as? Bool == true,
                         "app: \(app.currentOutput) \(app.currentError.suffix(1500)); replayd: \(replayd.currentError.suffix(3000)) \(log.suffix(3000))")
            try await SystemTests.BroadcastTests.waitFor("the app's first picture") {
                SystemTests.BroadcastTests.events(in: folder).contains { $0.hasPrefix("first picture") }
            }

            // The person broadcasts: the app's broadcast ends first (its extension leaves), then theirs starts.
            let broadcast = try environment.startReplay(["broadcast", "--service", seed])
            let result = try await app.waitForExit(timeout: .seconds(60))
            let ended = try Self.line(Self.lines(result.stdout), "broadcast-wait-ended=60")
            #expect(ended["delegate"] as? Bool == true && Self.code(ended) == -5806, "interrupted, heard by the delegate: \(ended)")
            try await SystemTests.BroadcastTests.waitFor("the person's broadcast's first picture") {
                SystemTests.BroadcastTests.events(in: folder).filter { $0.hasPrefix("first picture") }.count == 2
            }
            let events = SystemTests.BroadcastTests.events(in: folder)
            let firstFinished = events.firstIndex(of: "finished") ?? -1
            let secondStarted = events.lastIndex { $0.hasPrefix("started") } ?? -1
            #expect(firstFinished >= 0 && firstFinished < secondStarted, "the app's extension finished before the person's started: \(events)")
            let status = try await environment.replay(["status"])
            #expect(status.stdout.contains("broadcasting to \(seed)"), "\(status)")
            #expect(try await environment.replay(["stop"]).succeeded)
            let done = try await broadcast.waitForExit(timeout: .seconds(20))
            #expect(done.succeeded, "\(done)")
        }
    }
}
