import Testing
import Foundation
import Logging
import Synchronization
@testable import ReplayEngine
import ReplayIPC
import ReplayMedia
import ReplayTesting
#if canImport(Glibc)
import Glibc
#endif

/// A capture for a frame ring follows the screen's resolution (RandR) instead of scaling into its
/// first size: on a real Xvfb, xrandr shrinks the screen and grows it back mid-capture, and the ring's
/// reader (this process, handed the ring as an extension is) gets pictures of each size in turn, the
/// larger one through a new ring, with the test content's white bar where it is on the screen.
@Suite("Engine: a capture for a frame ring follows the screen's size", .serialized, .timeLimit(.minutes(2)))
struct EngineFollowsScreenSizeTests {
    @Test func theRingsReaderGetsEachSize() async throws {
        let logger = Logger(label: "test.engine.follow")
        try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480, audio: .deadServer)) { environment in
            func resize(_ size: String) async throws {
                #expect(try await environment.xvfb.resize(to: size) == size)
            }
            // Smaller than the Xvfb (its largest size) at the start, so that growing back outgrows the ring.
            try await resize("320x240")
            var configuration = EngineConfiguration(video: .screen(display: environment.xvfb.display), audio: [], durationSeconds: 60)
            configuration.screenSizeChanges = .followed
            let engine = try await RecordingEngine.prepare(configuration: configuration, logger: logger)
            #expect(engine.width == 320 && engine.height == 240)
            // A file's track has one size: such an engine takes no destination.
            #expect(throws: EngineError.self) {
                try engine.attach(try MovieWriter(path: environment.outputPath("refused.mp4"), logger: logger))
            }
            let ring = try RingTap(width: engine.width, height: engine.height, logger: logger)
            try engine.attach(tap: ring)
            let path = "/tmp/ork-follow-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            try ring.offer(to: getpid(), at: path) { _ in }
            let (memory, signal) = try await RingHandover.receiveOffThePool(from: path)
            let reader = try FrameRingReader(memory: memory, signal: signal)
            // Each picture's size, and whether the white bar (of the 640x480 content) is white where it is.
            let seen = Mutex<[(size: String, white: Bool)]>([])
            let ended = DispatchSemaphore(value: 0)
            let bar = TestPattern(width: 640, height: 480).barCentre(0)
            reader.start(handler: { delivery in
                guard case .video(let frame) = delivery else { return }
                let white = frame.luma.load(fromByteOffset: bar.y * frame.lumaStride + bar.x, as: UInt8.self) > 200
                seen.withLock { $0.append(("\(frame.width)x\(frame.height)", white)) }
            }, ended: { ended.signal() })
            async let running: Void = engine.run()
            try await Task.sleep(for: .seconds(1.5))
            try await resize("640x480")
            try await Task.sleep(for: .seconds(1.5))
            try await resize("480x360")
            func lastSizeSeen() -> Bool { seen.withLock { pictures in pictures.contains { $0.size == "480x360" } } }
            try await engine.stop(once: lastSizeSeen)
            try await running
            ring.close()
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async { ended.wait(); done.resume() }
            }
            let pictures = seen.withLock { $0 }
            var runs: [String] = []
            for picture in pictures where runs.last != picture.size { runs.append(picture.size) }
            #expect(runs == ["320x240", "640x480", "480x360"], "\(runs)")
            // The bar's centre (40, 210) is on every one of these screens; a flash is white too.
            #expect(pictures.filter { $0.white }.count >= pictures.count * 9 / 10, "\(pictures.filter { !$0.white }.count) of \(pictures.count) not white")
            #expect(ring.capacity == (640, 480))
            #expect(ring.counters.framesWritten == UInt64(pictures.count))
        }
    }
}

extension RecordingEngine {
    /// Stops the engine once `done` says so (looked at every 50 ms, for at most `limit`), and half a
    /// second later. The screen-size tests' captures ran for a fixed 5 s, which on a busy machine
    /// (xrandr taking its time beside the other suites) ended before their last size came through.
    func stop(once done: () -> Bool, within limit: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + limit
        while !done(), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        try await Task.sleep(for: .milliseconds(500))
        stop()
    }
}
