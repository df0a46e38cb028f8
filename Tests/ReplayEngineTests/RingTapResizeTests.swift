import Testing
import Foundation
import Synchronization
import Logging
@testable import ReplayEngine
@testable import ReplayMedia
import ReplayIPC
import ReplayTesting
#if canImport(Glibc)
import Glibc
#endif

/// The frame ring follows the picture size (a broadcast's screen changes resolution): a smaller
/// picture goes into the same ring, a larger one makes a larger ring that is handed over to the same
/// reader (its pid, by `SO_PEERCRED`) and read on after the old one is drained: every picture,
/// at its size and with its pixels, and every chunk of sound, in order.
@Suite("Frame ring: a picture size change is followed", .timeLimit(.minutes(1)))
struct RingTapResizeTests {
    /// Picture `n` (I420, video range) of `width` × `height`.
    static func picture(_ n: Int, width: Int, height: Int) -> VideoFrame {
        let frame = VideoFrame(width: width, height: height)
        let (y, u, v) = frame.planes
        let (ys, us, vs) = frame.strides
        for row in 0..<height {
            for column in 0..<width { y[row * ys + column] = RingTestPattern.luma(x: column, y: row, frame: n) }
        }
        for row in 0..<height / 2 {
            for column in 0..<width / 2 {
                u[row * us + column] = RingTestPattern.cb(x: column, y: row, frame: n)
                v[row * vs + column] = RingTestPattern.cr(x: column, y: row, frame: n)
            }
        }
        return frame
    }

    /// Whether `frame` holds picture `n` at its size, every luma and chroma byte.
    static func holdsPicture(_ frame: FrameRingVideoFrame, _ n: Int) -> Bool {
        let luma = frame.luma.assumingMemoryBound(to: UInt8.self), chroma = frame.chroma.assumingMemoryBound(to: UInt8.self)
        for row in 0..<frame.height {
            for column in 0..<frame.width where luma[row * frame.lumaStride + column] != RingTestPattern.deliveredLuma(x: column, y: row, frame: n) {
                return false
            }
        }
        for row in 0..<frame.height / 2 {
            for column in 0..<frame.width / 2 {
                if chroma[row * frame.chromaStride + 2 * column] != RingTestPattern.deliveredCb(x: column, y: row, frame: n)
                    || chroma[row * frame.chromaStride + 2 * column + 1] != RingTestPattern.deliveredCr(x: column, y: row, frame: n) {
                    return false
                }
            }
        }
        return true
    }

    @Test func smallerPicturesStayLargerOnesMoveToAHandedOverRing() async throws {
        let tap = try RingTap(width: 64, height: 32, slotCount: 8, name: "ring-resize-test")
        let path = "/tmp/ork-ringtap-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let outcomes = Mutex<[Bool]>([])
        try tap.offer(to: getpid(), at: path) { result in outcomes.withLock { $0.append((try? result.get()) != nil) } }
        let (memory, signal) = try await RingHandover.receiveOffThePool(from: path)
        let reader = try FrameRingReader(memory: memory, signal: signal)

        struct Seen: Sendable { var sizes: [String] = []; var intact: [Bool] = []; var audio: [Int64] = []; var failure: String? }
        let seen = Mutex(Seen())
        let ended = DispatchSemaphore(value: 0)
        let numbers = Mutex<[Int64: Int]>([:])   // picture time → its number
        reader.start(handler: { delivery in
            switch delivery {
            case .video(let frame):
                let n = numbers.withLock { $0[frame.time] } ?? -1
                seen.withLock { $0.sizes.append("\(frame.width)x\(frame.height)"); $0.intact.append(Self.holdsPicture(frame, n)) }
            case .audio(let chunk):
                seen.withLock { $0.audio.append(chunk.time) }
            }
        }, failed: { error in seen.withLock { $0.failure = error.message } }, ended: { ended.signal() })

        // 64x32, 32x16 (smaller: the same ring), 128x48 (larger: a new ring), 64x32, 96x64 (taller: another).
        let sizes = [(64, 32), (32, 16), (128, 48), (64, 32), (96, 64), (128, 64)]
        let block = [Float](repeating: 0.5, count: 480 * 2)   // 10 ms of stereo
        for (n, size) in sizes.enumerated() {
            let time = Int64(n) * 100_000_000
            numbers.withLock { $0[time] = n }
            tap.receive(Self.picture(n, width: size.0, height: size.1), tick: Int64(n), time: time)
            block.withUnsafeBufferPointer { tap.receive(audio: $0, from: .application, time: time + 1) }
            // The reader keeps up (no slot is ever lacking): pictures are never dropped here.
            try await Task.sleep(for: .milliseconds(30))
        }
        #expect(tap.capacity == (128, 64))
        tap.close()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { ended.wait(); done.resume() }
        }
        let result = seen.withLock { $0 }
        #expect(result.failure == nil)
        #expect(result.sizes == sizes.map { "\($0.0)x\($0.1)" }, "every picture at its own size, in order")
        #expect(result.intact.allSatisfy { $0 }, "every picture's pixels: \(result.intact)")
        #expect(result.audio == sizes.indices.map { Int64($0) * 100_000_000 + 1 }, "every chunk of sound, in order, across the rings")
        #expect(outcomes.withLock { $0 } == [true, true, true], "the first ring and its two successors went to this process")
        let counters = tap.counters
        #expect(counters.framesWritten == 6 && counters.framesDropped == 0 && counters.audioChunksWritten == 6, "\(counters)")
        #expect(reader.counters.framesWritten == 6)
        // One reader, once: a second offer is an error, not a second reader.
        #expect(throws: ReplayError.self) { try tap.offer(to: getpid(), at: path + ".again") { _ in } }
    }

    /// A larger ring that cannot be made (here: its socket's path would be too long for a
    /// `sockaddr_un`) drops those pictures, counted, and says so once, not once a picture.
    @Test func aRingThatCannotGrowDropsThePicturesAndSaysSoOnce() async throws {
        let lines = LogLines()
        let logger = Logger(label: "test.ring.grow") { _ in lines }
        let tap = try RingTap(width: 64, height: 32, slotCount: 4, name: "ring-nogrow-test", logger: logger)
        // 107 bytes, the most a socket path may have: its successor's (`….1.sock`) is longer.
        let start = "/tmp/ork-ringtap-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-"
        let path = start + String(repeating: "x", count: 107 - start.utf8.count - 5) + ".sock"
        #expect(path.utf8.count == 107)
        try tap.offer(to: getpid(), at: path) { _ in }
        let (memory, signal) = try await RingHandover.receiveOffThePool(from: path)
        let reader = try FrameRingReader(memory: memory, signal: signal)
        let larger = Self.picture(0, width: 128, height: 64)
        for n in 0..<45 { tap.receive(larger, tick: Int64(n), time: Int64(n) * 33_333_333) }   // 1.5 s of pictures
        #expect(tap.capacity == (64, 32), "no larger ring")
        #expect(tap.counters.framesDropped == 45 && tap.counters.framesWritten == 0, "\(tap.counters)")
        let errors = lines.messages.filter { $0.contains("do not fit the frame ring") }
        #expect(errors.count == 1, "one line for the size, not one a picture: \(errors)")
        // Pictures that fit still go into the ring.
        tap.receive(Self.picture(1, width: 64, height: 32), tick: 45, time: 1_500_000_000)
        #expect(tap.counters.framesWritten == 1)
        tap.close()
        #expect(reader.counters.framesWritten == 1, "the reader's ring is the first one")
    }

    @Test func aRingThatCouldNotBeMadeIsTriedAgainOnceASecond() {
        var retry = RingGrowthRetry()
        var logged: Bool
        #expect(retry.shouldTry(width: 1280, height: 720, at: 0))
        logged = retry.failed(width: 1280, height: 720, at: 0)
        #expect(logged, "the first failure of a size is logged")
        #expect(!retry.shouldTry(width: 1280, height: 720, at: 33_000_000), "not again at the next picture")
        #expect(!retry.shouldTry(width: 1280, height: 720, at: 999_999_999))
        #expect(retry.shouldTry(width: 1920, height: 1080, at: 40_000_000), "another size is tried at once")
        #expect(retry.shouldTry(width: 1280, height: 720, at: 1_000_000_000), "the same size a second later")
        logged = retry.failed(width: 1280, height: 720, at: 1_000_000_000)
        #expect(!logged, "its failure is not logged again")
        logged = retry.failed(width: 1920, height: 1080, at: 1_100_000_000)
        #expect(logged, "another size's is, once")
        logged = retry.failed(width: 1920, height: 1080, at: 2_100_000_000)
        #expect(!logged)
        retry.succeeded()
        #expect(retry.shouldTry(width: 1920, height: 1080, at: 2_100_000_001))
        logged = retry.failed(width: 1920, height: 1080, at: 2_200_000_000)
        #expect(logged, "after a ring was made, a failure is news again")
    }

    @Test func successorPathsSitBesideTheFirst() {
        #expect(RingTap.successorPath("/run/ork/ring-ext-12-ab.sock", number: 2) == "/run/ork/ring-ext-12-ab.2.sock")
    }
}

/// Keeps every message logged to it (from any thread).
final class LogLines: LogHandler, Sendable {
    private let lines = Mutex<[String]>([])
    var messages: [String] { lines.withLock { $0 } }
    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }
    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }
    func log(event: LogEvent) {
        lines.withLock { $0.append(event.message.description) }
    }
}
