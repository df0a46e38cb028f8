package import ReplayMedia
package import ReplayIPC
package import Logging
import Synchronization

/// The writer of a frame ring, replayd's side of in-app capture: each picture the capture makes
/// goes straight from the capture's I420 canvas (video range, the encoder's) into a free slot's NV12
/// in full range (`FullRangeNV12`, the one copy a frame costs), is marked ready and wakes the app; with no slot free (the app holds or
/// has not yet taken every one) the picture is dropped whole and counted in the ring. Sound goes to
/// the ring's audio chunks, tagged app or microphone. Never blocks the capture or audio thread.
///
/// Pictures keep the size the capture gives them, which may change (a capture for a frame ring follows
/// the screen's resolution: the whole screen's for a system broadcast, the canvas of an app's windows
/// for its capture or broadcast): a smaller one goes into a slot as it is, a larger one than the ring
/// holds makes a larger ring, offered to the same process at a new socket (`RingHandover`, `SO_PEERCRED`),
/// whose path closes the old ring as its successor (`FrameRingWriter.close(successor:)`): the reader
/// drains the old ring, fetches the new one and reads on. Sound written meanwhile waits for the switch
/// (the audio thread writes under the same lock), so none is lost. When no larger ring can be made,
/// pictures of that size are dropped (counted), the failure is logged once, and a ring is tried
/// again at most once a second (`RingGrowthRetry`).
///
/// `offer(to:at:finished:)` the ring to its reader once; `close()` when the session ends.
package final class RingTap: FrameTap, AudioTap {
    private struct State {
        var writer: FrameRingWriter
        /// Who reads the ring, once offered: every larger ring goes to the same process.
        var reader: Reader?
        /// What the rings left behind counted.
        var retired = FrameRingCounters()
        var successors = 0
        /// When a larger ring that could not be made is tried again, and which failures were logged.
        var growth = RingGrowthRetry()
    }

    private struct Reader {
        let pid: Int32
        let path: String
        let finished: @Sendable (Result<Void, ReplayError>) -> Void
    }

    private let state: Mutex<State>
    private let name: String
    private let logger: Logger
    /// While set (a paused broadcast), nothing goes into the ring.
    private let paused = Atomic<Bool>(false)

    /// A ring for pictures of `width` × `height` (the capture's output size when it starts).
    package init(width: Int, height: Int, slotCount: Int = 5, name: String = "openreplaykit-ring",
                 logger: Logger = Logger(label: "org.openreplaykit.ring")) throws(ReplayError) {
        let writer = try FrameRingWriter(layout: FrameRingLayout(width: width, height: height, slotCount: slotCount), name: name)
        state = Mutex(State(writer: writer))
        self.name = name
        self.logger = logger
    }

    /// The ring's memory and eventfd, in the order `FrameRingReader` takes them: the ring written
    /// now, for a reader that takes it itself (`replay-ring`); `offer` hands it and its successors over.
    package var descriptors: [Int32] { state.withLock { $0.writer.descriptors } }

    /// The largest picture the ring written now holds.
    package var capacity: (width: Int, height: Int) {
        state.withLock { ($0.writer.layout.width, $0.writer.layout.height) }
    }

    /// Every ring's counters added up.
    package var counters: FrameRingCounters { state.withLock { $0.retired + $0.writer.counters } }

    /// Offers the ring to the process `pid` (and only it) at a socket at `path` in replayd's private
    /// folder, once (`RingHandover.offer`); a larger ring later goes to the same process at a path
    /// beside it. `finished` hears each handover's outcome (on the handover's thread).
    package func offer(to pid: Int32, at path: String,
                       finished: @escaping @Sendable (Result<Void, ReplayError>) -> Void) throws(ReplayError) {
        try state.withLock { state throws(ReplayError) in
            guard state.reader == nil else {
                throw ReplayError(.internal, "the frame ring was offered already (to pid \(state.reader?.pid ?? 0)); it goes to one reader, once")
            }
            try RingHandover.offer(state.writer.descriptors, to: pid, at: path, keepAlive: state.writer, finished: finished)
            state.reader = Reader(pid: pid, path: path, finished: finished)
        }
    }

    /// Pauses or resumes what goes into the ring (a broadcast's pause: the extension gets nothing meanwhile).
    package func setPaused(_ on: Bool) { paused.store(on, ordering: .relaxed) }

    package func receive(_ picture: VideoFrame, tick: Int64, time: Int64) {
        guard !paused.load(ordering: .relaxed) else { return }
        // The capture thread is the only one that replaces the writer: this one stays current.
        var writer = state.withLock { $0.writer }
        if picture.width > writer.layout.width || picture.height > writer.layout.height {
            guard let larger = grow(toFit: picture, at: time) else {
                writer.dropFrame()
                return
            }
            writer = larger
        }
        // No free slot is counted by beginFrame.
        guard let slot = writer.beginFrame() else { return }
        FullRangeNV12.copy(picture, toLuma: slot.luma, stride: slot.lumaStride, chroma: slot.chroma, stride: slot.chromaStride)
        writer.publish(slot, width: picture.width, height: picture.height, time: time, tick: tick)
    }

    /// A ring large enough for `picture` (and for the old capacity: a screen turned back fits),
    /// offered to the reader, named as the old ring's successor as that one closes. Nil (the picture
    /// is dropped) when it cannot be made, or when it could not be made a moment ago (`time`: the
    /// picture's, on the engine's monotonic clock).
    private func grow(toFit picture: VideoFrame, at time: Int64) -> FrameRingWriter? {
        state.withLock { state -> FrameRingWriter? in
            guard state.growth.shouldTry(width: picture.width, height: picture.height, at: time) else { return nil }
            let old = state.writer
            let layout = FrameRingLayout(width: max(old.layout.width, picture.width), height: max(old.layout.height, picture.height),
                                         slotCount: old.layout.slotCount, audioChunkCount: old.layout.audioChunkCount,
                                         audioChunkFrames: old.layout.audioChunkFrames)
            let writer: FrameRingWriter
            var successor: String?
            do throws(ReplayError) {
                writer = try FrameRingWriter(layout: layout, name: name)
                if let reader = state.reader {
                    let path = Self.successorPath(reader.path, number: state.successors + 1)
                    guard path.utf8.count <= FrameRingLayout.maximumSuccessorPath else {
                        throw ReplayError(.internal, "the socket path \(path) is too long")
                    }
                    try RingHandover.offer(writer.descriptors, to: reader.pid, at: path, keepAlive: writer, finished: reader.finished)
                    successor = path
                    state.successors += 1
                }
            } catch {
                if state.growth.failed(width: picture.width, height: picture.height, at: time) {
                    logger.error("pictures of \(picture.width)x\(picture.height) do not fit the frame ring (\(old.layout.width)x\(old.layout.height)) and no larger ring could be made: \(error.message); they are dropped (counted) and a larger ring is tried again each second")
                }
                return nil
            }
            state.growth.succeeded()
            state.retired = state.retired + old.counters
            state.writer = writer
            old.close(successor: successor)
            logger.notice("pictures of \(picture.width)x\(picture.height) outgrow the frame ring (\(old.layout.width)x\(old.layout.height)): a ring of \(layout.width)x\(layout.height) follows it")
            return writer
        }
    }

    /// `ring-…-abc.sock` → `ring-…-abc.N.sock`.
    static func successorPath(_ path: String, number: Int) -> String {
        (path.hasSuffix(".sock") ? String(path.dropLast(5)) : path) + ".\(number).sock"
    }

    package func receive(audio samples: UnsafeBufferPointer<Float>, from source: TappedAudioSource, time: Int64) {
        guard !paused.load(ordering: .relaxed) else { return }
        // Under the lock: a ring that closes for a larger one takes no sound after its close.
        state.withLock { $0.writer.writeAudio(samples, kind: source == .microphone ? .microphone : .app, time: time) }
    }

    /// The session is over: the app delivers what is ready and its capture ends.
    package func close() {
        state.withLock { $0.writer.close() }
    }
}

/// The capture's canvas (I420, BT.601 video range: libyuv `ARGBToI420`, what the encoder takes) to
/// NV12 in full range, what ReplayKit's '420f' pictures carry: the same BT.601 matrix, levels
/// stretched while the planes are copied and the chroma interleaved, Y' = (Y - 16) × 255 / 219 and
/// C' = (C - 128) × 255 / 224 + 128, rounded and clamped to 0…255. Black is Y 0, white Y 255, the
/// greys' chroma 128; pure green (BT.601 full range) Y 149, Cb 44, Cr 21.
///
/// Two bytes a look-up (128 KB tables): two luma pixels, or a Cb and a Cr into their NV12 pair, which
/// keeps a debug build (the tests') fast enough too. `replay-ring bench` measures it (docs/BENCHMARKS.md).
package enum FullRangeNV12 {
    /// Video-range luma (16…235) to full range.
    package static let luma: [UInt8] = table { (Double($0) - 16) * 255 / 219 }
    /// Video-range chroma (16…240 about 128) to full range.
    package static let chroma: [UInt8] = table { (Double($0) - 128) * 255 / 224 + 128 }
    /// Two bytes at once, as a UInt16 in memory order: two luma pixels; a Cb (low byte) and a Cr (high byte).
    private static let lumaPairs: [UInt16] = (0..<65_536).map { UInt16(luma[$0 & 255]) | UInt16(luma[$0 >> 8]) << 8 }
    private static let chromaPairs: [UInt16] = (0..<65_536).map { UInt16(chroma[$0 & 255]) | UInt16(chroma[$0 >> 8]) << 8 }

    private static func table(_ level: (Int) -> Double) -> [UInt8] {
        (0..<256).map { UInt8(max(0, min(255, level($0).rounded()))) }
    }

    /// Copies `picture` (its whole size, even as the capture makes it; planes and rows 2-byte aligned,
    /// as libav's and the ring's are) into NV12 planes of the same size.
    package static func copy(_ picture: VideoFrame, toLuma lumaPlane: UnsafeMutablePointer<UInt8>, stride lumaStride: Int,
                             chroma chromaPlane: UnsafeMutablePointer<UInt8>, stride chromaStride: Int) {
        precondition(picture.width % 2 == 0 && picture.height % 2 == 0, "an even picture")
        let (y, u, v) = picture.planes
        let (ys, us, vs) = picture.strides
        let pairsPerRow = picture.width / 2
        // Typed pointers and while loops: a debug build (the tests') stays within a few milliseconds.
        lumaPairs.withUnsafeBufferPointer { pairs in
            let table = pairs.baseAddress!
            for row in 0..<picture.height {
                var source = UnsafeRawPointer(y + row * ys).assumingMemoryBound(to: UInt16.self)
                var target = UnsafeMutableRawPointer(lumaPlane + row * lumaStride).assumingMemoryBound(to: UInt16.self)
                let end = source + pairsPerRow
                while source < end {
                    target.pointee = table[Int(source.pointee)]
                    source += 1
                    target += 1
                }
            }
        }
        chromaPairs.withUnsafeBufferPointer { pairs in
            let table = pairs.baseAddress!
            for row in 0..<picture.height / 2 {
                var cb = UnsafePointer(u + row * us), cr = UnsafePointer(v + row * vs)
                var target = UnsafeMutableRawPointer(chromaPlane + row * chromaStride).assumingMemoryBound(to: UInt16.self)
                let end = cb + pairsPerRow
                while cb < end {
                    target.pointee = table[Int(cb.pointee) | Int(cr.pointee) << 8]
                    cb += 1
                    cr += 1
                    target += 1
                }
            }
        }
    }
}

/// When `RingTap` tries again to make a larger ring after making one failed (no memory, no descriptor
/// left, a handover socket that cannot be made), and which failures it logs: with pictures coming 30
/// times a second, neither a new ring (a memfd, its mapping, a socket) nor a log line for each. A size
/// not tried yet is tried at once; after a failure, the same size again once `retryInterval` has
/// passed. Each size's failure is logged once, until a ring is made.
struct RingGrowthRetry: Sendable {
    /// Nanoseconds between two tries of the same size.
    static let retryInterval: Int64 = 1_000_000_000

    private var lastFailure: (width: Int, height: Int, at: Int64)?
    private var logged: [(width: Int, height: Int)] = []

    /// Whether to try making a ring for a picture of `width` × `height` at `time` (monotonic ns).
    func shouldTry(width: Int, height: Int, at time: Int64) -> Bool {
        guard let lastFailure, lastFailure.width == width, lastFailure.height == height else { return true }
        return time - lastFailure.at >= Self.retryInterval
    }

    /// Making the ring failed; true when this size's failure is to be logged (the first time).
    mutating func failed(width: Int, height: Int, at time: Int64) -> Bool {
        lastFailure = (width, height, time)
        guard !logged.contains(where: { $0 == (width, height) }) else { return false }
        logged.append((width, height))
        return true
    }

    /// A ring was made: a later failure is news again.
    mutating func succeeded() {
        lastFailure = nil
        logged = []
    }
}
