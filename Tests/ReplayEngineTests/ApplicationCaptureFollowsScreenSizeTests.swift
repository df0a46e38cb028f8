import Testing
import Foundation
import Logging
import Synchronization
import class ReplayCapture.ApplicationCapture
@testable import ReplayEngine
@testable import ReplayMedia
import ReplayIPC
import ReplayTesting

/// An application's own capture when the screen changes size (RandR), on a real Xvfb resized with
/// xrandr mid-capture. Application A (red) has a window that reaches past the first screen's edge;
/// application B (blue) has one over it, also past the edge. A capture for a frame ring follows: its
/// pictures take each new size, A's whole window shows once the screen holds it (read from its pixmap
/// even where B covers it), and everything else is black, never blue. A capture that does not follow
/// (an app's recording: a movie's track has one size) keeps its first size, A cut to it.
@Suite("Engine: an app's capture and the screen's size", .serialized, .timeLimit(.minutes(2)))
struct ApplicationCaptureFollowsScreenSizeTests {
    static let red: UInt32 = 0xff0000, blue: UInt32 = 0x0000ff
    /// A's window: inside a 320x240 screen only its top-left corner.
    static let windowA = PixelRect(x: 200, y: 120, width: 300, height: 200)
    static let windowB = PixelRect(x: 100, y: 60, width: 340, height: 280)
    let logger = Logger(label: "test.app-capture.follow")
    /// One picture the ring's reader got: its size, what is wrong in it, its red and blue samples.
    struct Seen: Sendable { var size: String; var problems: [String]; var red: Int; var blue: Int }

    /// An Xvfb of 640x480 (its largest size) made 320x240, with A and then B on it.
    func withApps(_ body: (TestEnvironment, TestApp, (String) async throws -> Void) async throws -> Void) async throws {
        try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480, audio: .deadServer, content: nil)) { environment in
            func resize(_ size: String) async throws {
                #expect(try await environment.xvfb.resize(to: size) == size)
            }
            try await resize("320x240")
            let a = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                            options: TestApp.Options(colour: Self.red, rect: Self.windowA))
            let b = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                            options: TestApp.Options(colour: Self.blue, rect: Self.windowB))
            defer { a.kill(); b.kill() }
            try await body(environment, a, resize)
            await a.stop()
            await b.stop()
        }
    }

    @Test func aCaptureForAFrameRingTakesEachSizeWithOnlyTheAppsWindow() async throws {
        try await withApps { environment, a, resize in
            var configuration = EngineConfiguration(video: .application(display: environment.xvfb.display, ApplicationScope(processID: a.pid)),
                                                    audio: [], durationSeconds: 60)
            configuration.screenSizeChanges = .followed
            let engine = try await RecordingEngine.prepare(configuration: configuration, logger: logger)
            #expect(engine.width == 320 && engine.height == 240)
            let ring = try RingTap(width: engine.width, height: engine.height, logger: logger)
            try engine.attach(tap: ring)
            let path = "/tmp/ork-appfollow-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            try ring.offer(to: getpid(), at: path) { _ in }
            let (memory, signal) = try await RingHandover.receiveOffThePool(from: path)
            let reader = try FrameRingReader(memory: memory, signal: signal)

            let seen = Mutex<[Seen]>([])
            let ended = DispatchSemaphore(value: 0)
            reader.start(handler: { delivery in
                guard case .video(let frame) = delivery else { return }
                let luma = frame.luma.assumingMemoryBound(to: UInt8.self), chroma = frame.chroma.assumingMemoryBound(to: UInt8.self)
                let check = Self.check(width: frame.width, height: frame.height) { x, y in
                    let pair = (y / 2) * frame.chromaStride + (x / 2) * 2
                    return (Int(luma[y * frame.lumaStride + x]), Int(chroma[pair]), Int(chroma[pair + 1]))
                }
                seen.withLock { $0.append(Seen(size: "\(frame.width)x\(frame.height)", problems: check.problems, red: check.red, blue: check.blue)) }
            }, ended: { ended.signal() })
            async let running: Void = engine.run()
            try await Task.sleep(for: .seconds(1.5))
            try await resize("640x480")   // larger than the ring: a new one, handed over to this process
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
            #expect(pictures.allSatisfy { $0.blue == 0 }, "no pixel of B's window in any picture: \(pictures.map { $0.blue })")
            let wrong = pictures.filter { !$0.problems.isEmpty }
            #expect(wrong.isEmpty, "A's window red where the screen holds it (under B too), black elsewhere: \(wrong.prefix(3).map { "\($0.size): \($0.problems)" })")
            // At 640x480 all of A's window shows, the part past the first screen's edge too.
            var whole = 0
            for picture in pictures where picture.size == "640x480" { whole = max(whole, picture.red) }
            #expect(whole > 280 * 180 / 16, "A's whole window at 640x480: \(whole) red samples")
            #expect(ring.capacity == (640, 480))
            #expect(ring.counters.framesWritten == UInt64(pictures.count))
        }
    }

    @Test func aCaptureThatDoesNotFollowKeepsItsSizeAndCutsTheWindowsToIt() async throws {
        try await withApps { environment, a, resize in
            let capture = try ApplicationCapture(display: environment.xvfb.display, processID: a.pid, logger: logger)
            capture.prime()
            let frame = capture.current
            /// Updates for `seconds`, then checks the picture: A's corner that the first screen held, black elsewhere.
            func settle(_ seconds: Double, _ what: String) async throws {
                let end = MonotonicClock.now() + Int64(seconds * 1e9)
                while MonotonicClock.now() < end {
                    _ = try capture.update()
                    try await Task.sleep(for: .milliseconds(30))
                }
                #expect(capture.outputWidth == 320 && capture.outputHeight == 240, "\(what): \(capture.outputWidth)x\(capture.outputHeight)")
                #expect(capture.current === frame, "\(what): the same picture")
                let (y, u, v) = capture.current.planes
                let (ys, us, vs) = capture.current.strides
                let check = Self.check(width: 320, height: 240) { x, row in
                    // The capture's canvas is video range (the encoder's): as the ring would carry it.
                    (Int(FullRangeNV12.luma[Int(y[row * ys + x])]), Int(FullRangeNV12.chroma[Int(u[(row / 2) * us + x / 2])]),
                     Int(FullRangeNV12.chroma[Int(v[(row / 2) * vs + x / 2])]))
                }
                #expect(check.problems.isEmpty && check.blue == 0, "\(what): \(check.problems), \(check.blue) blue")
                #expect(check.red > 100 * 100 / 16, "\(what): A's corner shows: \(check.red) red samples")
            }
            try await settle(1, "at the start")
            try await resize("640x480")
            try await settle(1, "the screen grown")
            try await resize("240x180")
            try await settle(1, "the screen shrunk below the picture")
        }
    }

    /// Samples (every 4 pixels) of a picture of `width` × `height` whose full-range Y, Cb, Cr `at`
    /// gives: inside A's window (4 pixels in) red, outside it (4 pixels out) black, nowhere blue.
    /// The problems (at most 8), and how many samples were red and blue.
    static func check(width: Int, height: Int, at: (Int, Int) -> (Int, Int, Int)) -> (problems: [String], red: Int, blue: Int) {
        let bounds = PixelRect(x: 0, y: 0, width: width, height: height)
        let inside = windowA.insetBy(-4, clippedTo: bounds), around = windowA.insetBy(4, clippedTo: bounds)   // (insetBy grows by its margin)
        var problems: [String] = []
        var red = 0, blue = 0
        for y in stride(from: 0, to: height, by: 4) {
            for x in stride(from: 0, to: width, by: 4) {
                let (luma, cb, cr) = at(x, y)
                // Full range: red is Y 76, Cb 85, Cr 255; blue Y 29, Cb 255, Cr 107; black Y 0, Cb Cr 128.
                let isRed = cr > 200 && cb < 130 && (50...110).contains(luma)
                let isBlue = cb > 190
                let isBlack = luma < 20 && abs(cb - 128) < 12 && abs(cr - 128) < 12
                if isRed { red += 1 }
                if isBlue { blue += 1 }
                if inside.contains(x: x, y: y), !isRed {
                    problems.append("(\(x),\(y)) is \(luma),\(cb),\(cr), not red")
                } else if !around.contains(x: x, y: y), !isBlack {
                    problems.append("(\(x),\(y)) is \(luma),\(cb),\(cr), not black")
                }
                if problems.count >= 8 { return (problems, red, blue) }
            }
        }
        return (problems, red, blue)
    }
}
