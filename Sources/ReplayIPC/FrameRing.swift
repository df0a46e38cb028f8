import Synchronization
import CSocketShim
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where everything lies in a frame ring's shared memory: the transport of in-app capture. replayd
/// (the writer) makes one `SharedMemory` holding a header, `slotCount` video slots of NV12 pictures
/// and an audio ring of PCM chunks, and hands it to the app once, with an eventfd that wakes the app
/// (the reader) when something is ready: no message and no copy per frame between the processes.
///
/// Every number is little-endian. The header (4096 bytes):
///
/// | offset | field | |
/// |---|---|---|
/// | 0 | magic `UInt32` | "ORKR" |
/// | 4 | version `UInt32` | 2 |
/// | 8, 12 | capacity: width, height `UInt32` | the largest picture a slot holds, pixels |
/// | 16 | pixel format `UInt32` | '420f' (0x34323066): NV12, full range |
/// | 20 | slot count `UInt32` | |
/// | 24 | slot size `UInt64` | bytes, a multiple of 4096 |
/// | 32 | offset of slot 0 `UInt64` | 4096 |
/// | 40, 44 | luma plane: offset in a slot, bytes per row `UInt32` | |
/// | 48, 52 | chroma plane (CbCr interleaved): offset in a slot, bytes per row `UInt32` | |
/// | 56 | offset of the audio ring `UInt64` | |
/// | 64, 68 | audio chunk count, frames a chunk holds at most `UInt32` | |
/// | 72, 76 | audio chunk size (bytes), sample rate `UInt32` | 48000 |
/// | 80, 84 | channels, sample format `UInt32` | 2, 1 = Float32 interleaved |
/// | 128… | counters (atomic `UInt64`, written by the writer) | see `FrameRingCounters` |
/// | 192 | audio chunks read (atomic `UInt64`, written by the reader) | |
/// | 256, 260 | successor: length `UInt32`, then that many bytes of a socket path (UTF-8, at most 107) | 0: none |
///
/// A video slot: its state word (atomic `UInt64`: sequence << 2 | state, state 0 free, 1 writing,
/// 2 ready, 3 reading), its presentation time (`Int64`, nanoseconds on the session clock: the
/// engine's `CLOCK_MONOTONIC`), its frame tick (`Int64`), its picture's width and height (`UInt32`
/// each, at 24 and 28: at most the capacity; the planes keep the capacity's strides), then the
/// planes at their offsets.
///
/// The picture size may change from one slot to the next (the screen's resolution changed during a
/// broadcast) within the capacity. A larger picture needs a larger ring: the writer makes one, offers
/// it to the same reader process (`RingHandover`, the reader's pid checked by `SO_PEERCRED`), writes
/// that socket's path as the successor and closes this ring. The reader delivers what this ring still
/// holds, fetches the successor and goes on reading it: nothing is lost across the change.
/// An audio chunk: its kind (`UInt32`: 2 app, 3 microphone, as `RPSampleBufferType`), its frame
/// count (`UInt32`), its time (`Int64`, the first sample), then the samples at byte 32.
package struct FrameRingLayout: Sendable, Equatable {
    package static let magic: UInt32 = 0x524B_524F   // "ORKR"
    package static let version: UInt32 = 2
    /// CoreVideo's `kCVPixelFormatType_420YpCbCr8BiPlanarFullRange`, '420f'.
    package static let pixelFormatNV12FullRange: UInt32 = 0x3432_3066
    package static let sampleRate = 48_000
    package static let channels = 2
    package static let sampleFormatFloat32Interleaved: UInt32 = 1
    static let headerSize = 4096
    static let slotHeaderSize = 64
    static let audioChunkHeaderSize = 32
    static let page = 4096
    static let successorOffset = 256
    /// The longest successor path (a `sockaddr_un` holds 107 bytes and a NUL).
    package static let maximumSuccessorPath = 107

    /// The capacity: the largest picture a slot holds (each slot says its own picture's size).
    package let width: Int
    package let height: Int
    package let slotCount: Int
    package let slotSize: Int
    package let lumaOffset: Int
    package let lumaStride: Int
    package let chromaOffset: Int
    package let chromaStride: Int
    package let audioOffset: Int
    package let audioChunkCount: Int
    package let audioChunkFrames: Int
    package let audioChunkSize: Int
    package var slotsOffset: Int { Self.headerSize }
    package var chromaHeight: Int { (height + 1) / 2 }
    /// Bytes of the whole ring.
    package var size: Int { audioOffset + Self.roundUp(audioChunkCount * audioChunkSize, to: Self.page) }

    /// The layout replayd makes for pictures of up to `width` × `height`: `slotCount` slots (4–6 keep an
    /// app a few frames of slack at 30 fps) and `audioChunkCount` chunks of up to `audioChunkFrames`
    /// (128 of 2048 frames: 5 s of sound at 48 kHz, in 1024-frame blocks 2.7 s).
    package init(width: Int, height: Int, slotCount: Int = 5, audioChunkCount: Int = 128, audioChunkFrames: Int = 2048) {
        precondition(width > 0 && height > 0 && slotCount > 0 && audioChunkCount > 0 && audioChunkFrames > 0)
        self.width = width
        self.height = height
        self.slotCount = slotCount
        lumaStride = Self.roundUp(width, to: 64)
        chromaStride = Self.roundUp(2 * ((width + 1) / 2), to: 64)
        lumaOffset = Self.slotHeaderSize
        chromaOffset = Self.roundUp(lumaOffset + lumaStride * height, to: 64)
        slotSize = Self.roundUp(chromaOffset + chromaStride * ((height + 1) / 2), to: Self.page)
        audioOffset = Self.headerSize + slotCount * slotSize
        self.audioChunkCount = audioChunkCount
        self.audioChunkFrames = audioChunkFrames
        audioChunkSize = Self.roundUp(Self.audioChunkHeaderSize + audioChunkFrames * Self.channels * 4, to: 64)
    }

    /// Reads the layout a writer put in `memory`, checking that everything it says lies inside the
    /// memory, so that a reader never touches a byte past its mapping.
    package init(reading memory: UnsafeRawPointer, size: Int) throws(ReplayError) {
        func u32(_ offset: Int) -> Int { Int(UInt32(littleEndian: memory.loadUnaligned(fromByteOffset: offset, as: UInt32.self))) }
        func u64(_ offset: Int) -> Int { Int(truncatingIfNeeded: UInt64(littleEndian: memory.loadUnaligned(fromByteOffset: offset, as: UInt64.self))) }
        guard size >= Self.headerSize, u32(0) == Self.magic else {
            throw ReplayError(.protocolMismatch, "the shared memory received is not a frame ring")
        }
        guard u32(4) == Self.version else {
            throw ReplayError(.protocolMismatch, "the frame ring is version \(u32(4)); this library reads version \(Self.version): update OpenReplayKit or replayd so that they match")
        }
        guard u32(16) == Self.pixelFormatNV12FullRange, u32(76) == Self.sampleRate, u32(80) == Self.channels,
              u32(84) == Self.sampleFormatFloat32Interleaved else {
            throw ReplayError(.protocolMismatch, "the frame ring's pixel or sample format is not NV12 and Float32 48 kHz stereo")
        }
        let (width, height, slots, chunks, chunkFrames) = (u32(8), u32(12), u32(20), u32(64), u32(68))
        guard (1...16_384).contains(width), (1...16_384).contains(height), (1...64).contains(slots),
              (1...4096).contains(chunks), (1...65_536).contains(chunkFrames) else {
            throw ReplayError(.protocolMismatch, "the frame ring's header does not describe its memory")
        }
        let layout = FrameRingLayout(width: width, height: height, slotCount: slots,
                                     audioChunkCount: chunks, audioChunkFrames: chunkFrames)
        guard u64(24) == layout.slotSize, u64(32) == layout.slotsOffset,
              u32(40) == layout.lumaOffset, u32(44) == layout.lumaStride,
              u32(48) == layout.chromaOffset, u32(52) == layout.chromaStride,
              u64(56) == layout.audioOffset, u32(72) == layout.audioChunkSize, layout.size <= size else {
            throw ReplayError(.protocolMismatch, "the frame ring's header does not describe its memory")
        }
        self = layout
    }

    /// Writes the header (not the counters, which start at zero in fresh memory).
    func write(to memory: UnsafeMutableRawPointer) {
        func put32(_ value: Int, _ offset: Int) { memory.storeBytes(of: UInt32(value).littleEndian, toByteOffset: offset, as: UInt32.self) }
        func put64(_ value: Int, _ offset: Int) { memory.storeBytes(of: UInt64(value).littleEndian, toByteOffset: offset, as: UInt64.self) }
        memory.storeBytes(of: Self.magic.littleEndian, toByteOffset: 0, as: UInt32.self)
        put32(Int(Self.version), 4)
        put32(width, 8)
        put32(height, 12)
        put32(Int(Self.pixelFormatNV12FullRange), 16)
        put32(slotCount, 20)
        put64(slotSize, 24)
        put64(slotsOffset, 32)
        put32(lumaOffset, 40)
        put32(lumaStride, 44)
        put32(chromaOffset, 48)
        put32(chromaStride, 52)
        put64(audioOffset, 56)
        put32(audioChunkCount, 64)
        put32(audioChunkFrames, 68)
        put32(audioChunkSize, 72)
        put32(Self.sampleRate, 76)
        put32(Self.channels, 80)
        put32(Int(Self.sampleFormatFloat32Interleaved), 84)
    }

    func slot(_ index: Int) -> Int { slotsOffset + index * slotSize }
    func audioChunk(_ index: Int) -> Int { audioOffset + index * audioChunkSize }

    static func roundUp(_ value: Int, to multiple: Int) -> Int { (value + multiple - 1) / multiple * multiple }
}

/// What a frame ring counts, in its header: the writer's and the reader's view are the same numbers.
package struct FrameRingCounters: Sendable, Equatable {
    /// Pictures put in a slot and marked ready.
    package var framesWritten: UInt64 = 0
    /// Pictures dropped whole because no slot was free (the reader held or had not taken every one).
    package var framesDropped: UInt64 = 0
    /// Audio chunks written.
    package var audioChunksWritten: UInt64 = 0
    /// Audio chunks dropped because the audio ring was full (the reader fell 128 chunks behind), and their frames.
    package var audioChunksDropped: UInt64 = 0
    package var audioFramesDropped: UInt64 = 0
    /// The writer has finished: nothing more will come.
    package var closed = false
    package init() {}

    /// Two rings' counts added up (a ring and its successor): closed when the second is.
    package static func + (lhs: FrameRingCounters, rhs: FrameRingCounters) -> FrameRingCounters {
        var sum = rhs
        sum.framesWritten += lhs.framesWritten
        sum.framesDropped += lhs.framesDropped
        sum.audioChunksWritten += lhs.audioChunksWritten
        sum.audioChunksDropped += lhs.audioChunksDropped
        sum.audioFramesDropped += lhs.audioFramesDropped
        return sum
    }

    static let framesWrittenOffset = 128
    static let framesDroppedOffset = 136
    static let audioChunksWrittenOffset = 144
    static let audioChunksDroppedOffset = 152
    static let audioFramesDroppedOffset = 160
    static let closedOffset = 168
    static let audioChunksReadOffset = 192
}

/// The kind of an audio chunk, with `RPSampleBufferType`'s raw values.
package enum FrameRingAudioKind: UInt32, Sendable {
    case app = 2
    case microphone = 3
}

/// The state of a video slot, in the low two bits of its state word (the frame's sequence number above).
enum FrameRingSlotState: UInt64 {
    case free = 0, writing = 1, ready = 2, reading = 3
}

/// The atomics of a ring's memory, bound once.
struct FrameRingWords: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let slotStates: [UnsafeMutablePointer<Atomic<UInt64>>]

    init(base: UnsafeMutableRawPointer, layout: FrameRingLayout) {
        self.base = base
        slotStates = (0..<layout.slotCount).map { (base + layout.slot($0)).bindMemory(to: Atomic<UInt64>.self, capacity: 1) }
    }

    func word(_ offset: Int) -> UnsafeMutablePointer<Atomic<UInt64>> {
        (base + offset).bindMemory(to: Atomic<UInt64>.self, capacity: 1)
    }

    var counters: FrameRingCounters {
        var counters = FrameRingCounters()
        counters.framesWritten = word(FrameRingCounters.framesWrittenOffset).pointee.load(ordering: .acquiring)
        counters.framesDropped = word(FrameRingCounters.framesDroppedOffset).pointee.load(ordering: .relaxed)
        counters.audioChunksWritten = word(FrameRingCounters.audioChunksWrittenOffset).pointee.load(ordering: .acquiring)
        counters.audioChunksDropped = word(FrameRingCounters.audioChunksDroppedOffset).pointee.load(ordering: .relaxed)
        counters.audioFramesDropped = word(FrameRingCounters.audioFramesDroppedOffset).pointee.load(ordering: .relaxed)
        counters.closed = word(FrameRingCounters.closedOffset).pointee.load(ordering: .acquiring) != 0
        return counters
    }
}

/// The ring's wake-up: an eventfd (non-blocking, close-on-exec) the writer bumps after each frame
/// or audio write, and the reader waits on, on its own thread. Handed over once with the memory.
package final class FrameRingSignal: Sendable {
    package let descriptor: Int32

    package init() throws(ReplayError) {
        let fd = ork_eventfd_create()
        guard fd >= 0 else { throw ReplayError(.internal, "cannot create the frame ring's eventfd: \(String(cString: strerror(-fd)))") }
        descriptor = fd
    }

    /// Owns `fd`, an eventfd received from the writer.
    package init(adopting fd: Int32) {
        descriptor = fd
    }

    /// Wakes the reader. Never blocks (the counter saturating is as good as a wake-up).
    package func signal() {
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    /// Blocks until signalled (or `timeoutMilliseconds` pass; -1 waits for ever), then resets the counter.
    package func wait(timeoutMilliseconds: Int32 = -1) {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while poll(&poller, 1, timeoutMilliseconds) < 0, errno == EINTR {}
        var count: UInt64 = 0
        _ = read(descriptor, &count, 8)
    }

    deinit {
        close(descriptor)
    }
}

/// The writer's side of a frame ring (replayd): takes a free slot for a picture, publishes it ready,
/// and never waits: with no slot free, the picture is dropped whole and counted. Audio goes into
/// the audio ring, or is dropped whole chunk by chunk, counted, when the reader is that far behind.
///
/// Trusts nothing it reads from the memory except what it wrote itself (the reader maps it too):
/// the layout is its own copy, and a slot is reused only when its state word says free.
///
/// `@unchecked Sendable`: pictures are written from one thread (the capture thread) and audio from
/// one thread (the audio thread); each side's own variables are touched only by its thread, and
/// everything shared with the reader goes through atomics in the memory.
package final class FrameRingWriter: @unchecked Sendable {
    package let layout: FrameRingLayout
    package let memory: SharedMemory
    package let signal: FrameRingSignal
    private let words: FrameRingWords
    private var nextSlot = 0            // the video thread's
    private var sequence: UInt64 = 0    // the video thread's
    private var audioWritten: UInt64 = 0   // the audio thread's

    /// A slot the writer is filling: its planes.
    package struct Slot {
        package let index: Int
        package let sequence: UInt64
        package let luma: UnsafeMutablePointer<UInt8>
        package let chroma: UnsafeMutablePointer<UInt8>
        package let lumaStride: Int
        package let chromaStride: Int
    }

    package init(layout: FrameRingLayout, name: String = "openreplaykit-ring") throws(ReplayError) {
        self.layout = layout
        memory = try SharedMemory(name: name, size: layout.size)
        signal = try FrameRingSignal()
        layout.write(to: memory.baseAddress)
        words = FrameRingWords(base: memory.baseAddress, layout: layout)
    }

    /// What to hand to the reader, once: the memory, then the eventfd.
    package var descriptors: [Int32] { [memory.descriptor, signal.descriptor] }

    package var counters: FrameRingCounters { words.counters }

    /// A free slot, now marked writing, or nil when every slot is held or waiting for the reader:
    /// the picture is dropped and counted.
    package func beginFrame() -> Slot? {
        for step in 0..<layout.slotCount {
            let index = (nextSlot + step) % layout.slotCount
            let state = words.slotStates[index]
            let word = state.pointee.load(ordering: .acquiring)
            guard word & 3 == FrameRingSlotState.free.rawValue else { continue }
            sequence += 1
            let writing = sequence << 2 | FrameRingSlotState.writing.rawValue
            guard state.pointee.compareExchange(expected: word, desired: writing, ordering: .acquiringAndReleasing).exchanged else { continue }
            nextSlot = (index + 1) % layout.slotCount
            let slot = memory.baseAddress + layout.slot(index)
            return Slot(index: index, sequence: sequence,
                        luma: (slot + layout.lumaOffset).assumingMemoryBound(to: UInt8.self),
                        chroma: (slot + layout.chromaOffset).assumingMemoryBound(to: UInt8.self),
                        lumaStride: layout.lumaStride, chromaStride: layout.chromaStride)
        }
        words.word(FrameRingCounters.framesDroppedOffset).pointee.add(1, ordering: .relaxed)
        return nil
    }

    /// Counts a picture dropped whole for another reason than a full ring (it could not be written).
    package func dropFrame() {
        words.word(FrameRingCounters.framesDroppedOffset).pointee.add(1, ordering: .relaxed)
    }

    /// Marks a filled slot ready with its picture's size (at most the capacity), its time
    /// (nanoseconds, session clock) and tick, and wakes the reader.
    package func publish(_ slot: Slot, width: Int, height: Int, time: Int64, tick: Int64) {
        precondition((1...layout.width).contains(width) && (1...layout.height).contains(height), "a picture within the ring's capacity")
        let base = memory.baseAddress + layout.slot(slot.index)
        base.storeBytes(of: time.littleEndian, toByteOffset: 8, as: Int64.self)
        base.storeBytes(of: tick.littleEndian, toByteOffset: 16, as: Int64.self)
        base.storeBytes(of: UInt32(width).littleEndian, toByteOffset: 24, as: UInt32.self)
        base.storeBytes(of: UInt32(height).littleEndian, toByteOffset: 28, as: UInt32.self)
        words.slotStates[slot.index].pointee.store(slot.sequence << 2 | FrameRingSlotState.ready.rawValue, ordering: .releasing)
        words.word(FrameRingCounters.framesWrittenOffset).pointee.add(1, ordering: .releasing)
        signal.signal()
    }

    /// Puts interleaved stereo Float32 samples at 48 kHz whose first is at `time` into the audio
    /// ring, in chunks of at most `audioChunkFrames`; a chunk that finds the ring full is dropped,
    /// counted (chunks and frames). Wakes the reader once.
    package func writeAudio(_ samples: UnsafeBufferPointer<Float>, kind: FrameRingAudioKind, time: Int64) {
        let channels = FrameRingLayout.channels
        let frames = samples.count / channels
        guard frames > 0, let source = samples.baseAddress else { return }
        let readWord = words.word(FrameRingCounters.audioChunksReadOffset)
        var done = 0
        while done < frames {
            let count = min(layout.audioChunkFrames, frames - done)
            let chunkTime = time + Int64(done) * 1_000_000_000 / Int64(FrameRingLayout.sampleRate)
            let read = readWord.pointee.load(ordering: .acquiring)
            // A read count past what was written can only be the reader's garbage: treat as full.
            if read > audioWritten || audioWritten - read >= UInt64(layout.audioChunkCount) {
                words.word(FrameRingCounters.audioChunksDroppedOffset).pointee.add(1, ordering: .relaxed)
                words.word(FrameRingCounters.audioFramesDroppedOffset).pointee.add(UInt64(count), ordering: .relaxed)
            } else {
                let chunk = memory.baseAddress + layout.audioChunk(Int(audioWritten % UInt64(layout.audioChunkCount)))
                chunk.storeBytes(of: kind.rawValue.littleEndian, toByteOffset: 0, as: UInt32.self)
                chunk.storeBytes(of: UInt32(count).littleEndian, toByteOffset: 4, as: UInt32.self)
                chunk.storeBytes(of: chunkTime.littleEndian, toByteOffset: 8, as: Int64.self)
                (chunk + FrameRingLayout.audioChunkHeaderSize).copyMemory(from: source + done * channels, byteCount: count * channels * 4)
                audioWritten += 1
                words.word(FrameRingCounters.audioChunksWrittenOffset).pointee.store(audioWritten, ordering: .releasing)
            }
            done += count
        }
        signal.signal()
    }

    /// Nothing more will come: the reader delivers what is ready and ends, or, with a `successor`
    /// (the socket where the next ring is offered to the reader, `RingHandover`), fetches that ring
    /// and reads on there.
    package func close(successor: String? = nil) {
        if let successor {
            let bytes = Array(successor.utf8)
            precondition(!bytes.isEmpty && bytes.count <= FrameRingLayout.maximumSuccessorPath, "a successor path that fits a sockaddr_un")
            let base = memory.baseAddress + FrameRingLayout.successorOffset
            base.storeBytes(of: UInt32(bytes.count).littleEndian, toByteOffset: 0, as: UInt32.self)
            (base + 4).copyMemory(from: bytes, byteCount: bytes.count)
        }
        words.word(FrameRingCounters.closedOffset).pointee.store(1, ordering: .releasing)
        signal.signal()
    }
}

/// The reader's side of a frame ring (the app, in OpenReplayKit): waits on its own thread, takes
/// each ready slot in order and hands it out as a `FrameRingVideoFrame` pointing into the shared
/// memory (no copy); the slot is free again when the last reference to that frame goes. Audio
/// chunks are copied out of the ring (a few KB each) so that it advances in order.
///
/// When replayd closes the ring with a successor (the pictures outgrew it), `run` delivers what the
/// ring still holds, fetches the successor (`RingHandover`) and reads on there, with the same handler.
///
/// `@unchecked Sendable`: the memory and the eventfd never change after `init`; `audioRead` is
/// touched only by the reading thread (`run`, one at a time); `successor` is under its mutex; the
/// rest is atomics.
package final class FrameRingReader: @unchecked Sendable {
    /// This ring's layout (a successor's may be larger).
    package let layout: FrameRingLayout
    let memory: SharedMemory
    private let signal: FrameRingSignal
    private let words: FrameRingWords
    private let stopRequested = Atomic<Bool>(false)
    private let running = Atomic<Bool>(false)
    private var audioRead: UInt64 = 0
    /// The ring `run` reads now, once it moved on from this one.
    private let successor = Mutex<FrameRingReader?>(nil)
    /// What the rings `run` left behind counted.
    private let retiredCounters = Mutex(FrameRingCounters())

    /// What the reader hands out.
    package enum Delivery: Sendable {
        case video(FrameRingVideoFrame)
        case audio(FrameRingAudioChunk)

        package var time: Int64 {
            switch self {
            case .video(let frame): frame.time
            case .audio(let chunk): chunk.time
            }
        }
    }

    /// Maps the ring received from replayd (`memory`, then `signal`, as `FrameRingWriter.descriptors`
    /// sends them); both descriptors become the reader's. Throws when the memory is not a ring this
    /// version reads.
    package init(memory memoryDescriptor: Int32, signal signalDescriptor: Int32) throws(ReplayError) {
        signal = FrameRingSignal(adopting: signalDescriptor)
        memory = try SharedMemory(adopting: memoryDescriptor, writable: true)
        layout = try FrameRingLayout(reading: memory.baseAddress, size: memory.size)
        words = FrameRingWords(base: memory.baseAddress, layout: layout)
        audioRead = words.word(FrameRingCounters.audioChunksReadOffset).pointee.load(ordering: .acquiring)
    }

    /// The counters of every ring read so far, added up (the one read now included).
    package var counters: FrameRingCounters {
        let current = successor.withLock { $0 } ?? self
        return retiredCounters.withLock { $0 } + current.words.counters
    }

    /// Calls `handler` on the calling thread (a thread of its own: this blocks) with everything the
    /// writer makes ready, in time order, until the writer closes the ring (without a successor; one
    /// that cannot be fetched ends delivery too, said to `failed`) or `stop()` is called.
    package func run(_ handler: (Delivery) -> Void, failed: (ReplayError) -> Void = { _ in }) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        defer { running.store(false, ordering: .releasing) }
        var ring = self
        while let path = deliver(from: ring, handler) {
            let next: FrameRingReader
            do throws(ReplayError) {
                let (memory, signal) = try RingHandover.receive(from: path)
                next = try FrameRingReader(memory: memory, signal: signal)
            } catch {
                failed(ReplayError(error.code, "the frame ring grew and its successor could not be fetched: \(error.message)"))
                return
            }
            retiredCounters.withLock { $0 = $0 + ring.words.counters }
            // Installed before the stop flag is read again: a `stop()` signals this ring or sees the flag read.
            successor.withLock { $0 = next }
            ring = next
        }
    }

    /// Delivers from `ring` until it closes or `stop()`: the successor's path when it closed with one.
    private func deliver(from ring: FrameRingReader, _ handler: (Delivery) -> Void) -> String? {
        while !stopRequested.load(ordering: .acquiring) {
            // Closed before the drain: everything published before the close is drained now.
            let closed = ring.words.word(FrameRingCounters.closedOffset).pointee.load(ordering: .acquiring) != 0
            for delivery in ring.drain() {
                handler(delivery)
                if stopRequested.load(ordering: .acquiring) { return nil }
            }
            if closed { return ring.successorPath }
            ring.signal.wait()
        }
        return nil
    }

    /// The successor the writer named as it closed the ring, if any (read after the closed flag).
    private var successorPath: String? {
        let base = UnsafeRawPointer(memory.baseAddress + FrameRingLayout.successorOffset)
        let length = Int(UInt32(littleEndian: base.loadUnaligned(as: UInt32.self)))
        guard (1...FrameRingLayout.maximumSuccessorPath).contains(length) else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: base + 4, count: length), as: UTF8.self)
    }

    /// `run` on a new thread named `name`; `ended` is called on it when the ring closes or stops.
    package func start(named name: String = "openreplaykit-ring", handler: @escaping @Sendable (Delivery) -> Void,
                       failed: @escaping @Sendable (ReplayError) -> Void = { _ in }, ended: @escaping @Sendable () -> Void = {}) {
        let thread = Thread { [self] in
            run(handler, failed: failed)
            ended()
        }
        thread.name = name
        thread.start()
    }

    /// Ends `run` after the delivery in hand. Safe from any thread, the handler included.
    package func stop() {
        stopRequested.store(true, ordering: .releasing)
        (successor.withLock { $0 } ?? self).signal.signal()
    }

    /// Takes every ready slot (in sequence order) and copies every waiting audio chunk, merged by time.
    private func drain() -> [Delivery] {
        var frames: [FrameRingVideoFrame] = []
        for (index, state) in words.slotStates.enumerated() {
            let word = state.pointee.load(ordering: .acquiring)
            guard word & 3 == FrameRingSlotState.ready.rawValue else { continue }
            let reading = word & ~3 | FrameRingSlotState.reading.rawValue
            guard state.pointee.compareExchange(expected: word, desired: reading, ordering: .acquiringAndReleasing).exchanged else { continue }
            frames.append(FrameRingVideoFrame(reader: self, slot: index, sequence: word >> 2))
        }
        frames.sort { $0.sequence < $1.sequence }
        var chunks: [FrameRingAudioChunk] = []
        let written = words.word(FrameRingCounters.audioChunksWrittenOffset).pointee.load(ordering: .acquiring)
        let readWord = words.word(FrameRingCounters.audioChunksReadOffset)
        while audioRead < written {
            let chunk = memory.baseAddress + layout.audioChunk(Int(audioRead % UInt64(layout.audioChunkCount)))
            let kind = FrameRingAudioKind(rawValue: UInt32(littleEndian: chunk.load(fromByteOffset: 0, as: UInt32.self)))
            let count = Int(UInt32(littleEndian: chunk.load(fromByteOffset: 4, as: UInt32.self)))
            let time = Int64(littleEndian: chunk.load(fromByteOffset: 8, as: Int64.self))
            if let kind, count > 0, count <= layout.audioChunkFrames {
                chunks.append(FrameRingAudioChunk(kind: kind, time: time, frames: count,
                                                  copying: (chunk + FrameRingLayout.audioChunkHeaderSize).assumingMemoryBound(to: Float.self)))
            }
            audioRead += 1
            readWord.pointee.store(audioRead, ordering: .releasing)
        }
        guard !chunks.isEmpty else { return frames.map { .video($0) } }
        guard !frames.isEmpty else { return chunks.map { .audio($0) } }
        // Merge the two ordered lists by time (video first at equal times).
        var merged: [Delivery] = []
        merged.reserveCapacity(frames.count + chunks.count)
        var (v, a) = (0, 0)
        while v < frames.count || a < chunks.count {
            if a == chunks.count || (v < frames.count && frames[v].time <= chunks[a].time) {
                merged.append(.video(frames[v]))
                v += 1
            } else {
                merged.append(.audio(chunks[a]))
                a += 1
            }
        }
        return merged
    }

    /// The slot is the writer's again.
    fileprivate func release(slot: Int, sequence: UInt64) {
        words.slotStates[slot].pointee.store(sequence << 2 | FrameRingSlotState.free.rawValue, ordering: .releasing)
    }
}

/// One picture in a slot of the ring, NV12 (full range), read in place: the slot stays the app's
/// until this object goes, then the writer may reuse it. Keeps the ring's memory mapped meanwhile.
///
/// `@unchecked Sendable`: every property is set in `init` and never changes; the pixels are not
/// written by anyone while the slot is in the reading state.
package final class FrameRingVideoFrame: @unchecked Sendable {
    private let reader: FrameRingReader
    package let slot: Int
    package let sequence: UInt64
    /// Presentation time, nanoseconds on the session clock.
    package let time: Int64
    /// The capture's frame tick.
    package let tick: Int64
    package let width: Int
    package let height: Int
    package let luma: UnsafeMutableRawPointer
    package let chroma: UnsafeMutableRawPointer
    package let lumaStride: Int
    package let chromaStride: Int

    fileprivate init(reader: FrameRingReader, slot: Int, sequence: UInt64) {
        self.reader = reader
        self.slot = slot
        self.sequence = sequence
        let layout = reader.layout
        let base = reader.memory.baseAddress + layout.slot(slot)
        time = Int64(littleEndian: base.load(fromByteOffset: 8, as: Int64.self))
        tick = Int64(littleEndian: base.load(fromByteOffset: 16, as: Int64.self))
        // The slot's own size, within the capacity whatever the memory says (the planes lie there).
        let slotWidth = Int(UInt32(littleEndian: base.load(fromByteOffset: 24, as: UInt32.self)))
        let slotHeight = Int(UInt32(littleEndian: base.load(fromByteOffset: 28, as: UInt32.self)))
        width = (1...layout.width).contains(slotWidth) ? slotWidth : layout.width
        height = (1...layout.height).contains(slotHeight) ? slotHeight : layout.height
        luma = base + layout.lumaOffset
        chroma = base + layout.chromaOffset
        lumaStride = layout.lumaStride
        chromaStride = layout.chromaStride
    }

    deinit {
        reader.release(slot: slot, sequence: sequence)
    }
}

/// One chunk of sound from the ring: interleaved stereo Float32 at 48 kHz, copied out of the ring
/// into memory this object owns (stable for the object's life, as a `CMBlockBuffer`'s).
///
/// `@unchecked Sendable`: the samples are written in `init` only.
package final class FrameRingAudioChunk: @unchecked Sendable {
    package let kind: FrameRingAudioKind
    /// The first sample's time, nanoseconds on the session clock.
    package let time: Int64
    package let frames: Int
    package let samples: UnsafeMutableBufferPointer<Float>

    init(kind: FrameRingAudioKind, time: Int64, frames: Int, copying source: UnsafePointer<Float>) {
        self.kind = kind
        self.time = time
        self.frames = frames
        samples = .allocate(capacity: frames * FrameRingLayout.channels)
        _ = samples.initialize(from: UnsafeBufferPointer(start: source, count: frames * FrameRingLayout.channels))
    }

    deinit {
        samples.deallocate()
    }
}
