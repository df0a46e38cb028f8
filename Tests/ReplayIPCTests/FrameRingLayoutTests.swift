import Testing
import Synchronization
@testable import ReplayIPC
#if canImport(Glibc)
import Glibc
#endif

@Suite("Frame ring layout: what a reader accepts")
struct FrameRingLayoutTests {
    @Test func aWritersLayoutReadsBackAndFitsItsMemory() throws {
        let writer = try FrameRingWriter(layout: FrameRingLayout(width: 1920, height: 1080))
        let layout = try FrameRingLayout(reading: writer.memory.baseAddress, size: writer.memory.size)
        #expect(layout == writer.layout)
        #expect(layout.lumaStride == 1920 && layout.chromaStride == 1920 && layout.slotSize % 4096 == 0)
        #expect(layout.chromaOffset >= layout.lumaOffset + 1920 * 1080 && layout.slotSize >= layout.chromaOffset + 1920 * 540)
        #expect(writer.memory.baseAddress.load(fromByteOffset: 16, as: UInt32.self) == 0x3432_3066, "'420f'")
        // Odd sizes round up to whole chroma samples.
        let odd = FrameRingLayout(width: 101, height: 51)
        #expect(odd.chromaHeight == 26 && odd.chromaStride >= 102)
    }

    /// Memory that is not a ring, a header from another version, or a header whose offsets point
    /// past the memory: a clear error, never a read outside the mapping.
    @Test func badMemoryIsAClearError() throws {
        let writer = try FrameRingWriter(layout: FrameRingLayout(width: 64, height: 32))
        let base = writer.memory.baseAddress
        let size = writer.memory.size
        #expect(throws: ReplayError.self) { try FrameRingLayout(reading: base, size: 100) }
        base.storeBytes(of: 1 as UInt32, toByteOffset: 4, as: UInt32.self)
        #expect { try FrameRingLayout(reading: base, size: size) } throws: { ($0 as? ReplayError)?.message.contains("version 1") == true }
        base.storeBytes(of: 2 as UInt32, toByteOffset: 4, as: UInt32.self)
        base.storeBytes(of: 4096 as UInt32, toByteOffset: 12, as: UInt32.self)   // a height the memory cannot hold
        #expect(throws: ReplayError.self) { try FrameRingLayout(reading: base, size: size) }
        base.storeBytes(of: 32 as UInt32, toByteOffset: 12, as: UInt32.self)
        #expect(try FrameRingLayout(reading: base, size: size) == writer.layout)
        base.storeBytes(of: 0 as UInt32, toByteOffset: 0, as: UInt32.self)
        #expect(throws: ReplayError.self) { try FrameRingLayout(reading: base, size: size) }
    }

    /// The writer takes only free slots and drops (counted) when none is; a slot the reader frees is reused.
    @Test func theWriterNeverTakesASlotThatIsNotFree() throws {
        let writer = try FrameRingWriter(layout: FrameRingLayout(width: 16, height: 16, slotCount: 2))
        let reader = try FrameRingReader(memory: dup(writer.memory.descriptor), signal: dup(writer.signal.descriptor))
        let first = try #require(writer.beginFrame())
        writer.publish(first, width: 16, height: 16, time: 1, tick: 1)
        let second = try #require(writer.beginFrame())
        #expect(second.index != first.index)
        #expect(writer.beginFrame() == nil, "one ready, one being written: none free")
        writer.publish(second, width: 16, height: 16, time: 2, tick: 2)
        writer.close()
        var held: [FrameRingVideoFrame] = []
        reader.run { if case .video(let frame) = $0 { held.append(frame) } }
        #expect(held.map(\.time) == [1, 2])
        #expect(writer.beginFrame() == nil, "the reader holds both")
        held.removeFirst()
        let third = try #require(writer.beginFrame(), "the slot the reader let go of")
        #expect(third.index == first.index)
        #expect(writer.counters.framesDropped == 2 && writer.counters.framesWritten == 2)
    }

    /// Each slot says its own picture's size, within the capacity, with the capacity's strides: a
    /// smaller picture after a resolution change needs no new ring.
    @Test func eachSlotCarriesItsPicturesSize() throws {
        let writer = try FrameRingWriter(layout: FrameRingLayout(width: 64, height: 32, slotCount: 3))
        let reader = try FrameRingReader(memory: dup(writer.memory.descriptor), signal: dup(writer.signal.descriptor))
        for (n, size) in [(64, 32), (40, 20), (64, 32)].enumerated() {
            let slot = try #require(writer.beginFrame())
            slot.luma[0] = UInt8(n + 1)
            writer.publish(slot, width: size.0, height: size.1, time: Int64(n), tick: Int64(n))
        }
        writer.close()
        var seen: [(Int, Int, Int, UInt8)] = []
        reader.run { if case .video(let frame) = $0 { seen.append((frame.width, frame.height, frame.lumaStride, frame.luma.load(as: UInt8.self))) } }
        #expect(seen.map { $0.0 } == [64, 40, 64] && seen.map { $0.1 } == [32, 20, 32])
        #expect(seen.allSatisfy { $0.2 == 64 }, "the capacity's stride whatever the picture")
        #expect(seen.map { $0.3 } == [1, 2, 3])
        // A size past the capacity in the memory (the reader maps it writable too) reads as the capacity.
        let writer2 = try FrameRingWriter(layout: FrameRingLayout(width: 16, height: 16, slotCount: 1))
        let reader2 = try FrameRingReader(memory: dup(writer2.memory.descriptor), signal: dup(writer2.signal.descriptor))
        let slot = try #require(writer2.beginFrame())
        writer2.publish(slot, width: 16, height: 16, time: 0, tick: 0)
        (writer2.memory.baseAddress + writer2.layout.slot(slot.index)).storeBytes(of: 9999 as UInt32, toByteOffset: 24, as: UInt32.self)
        writer2.close()
        var widths: [Int] = []
        reader2.run { if case .video(let frame) = $0 { widths.append(frame.width) } }
        #expect(widths == [16])
    }

    /// The privacy of a handover (a first ring or a successor: an app's own pictures and sound): the
    /// socket hands the ring to the process it was offered to and to no other. This process, not the
    /// one named, connects and gets nothing; the offer still waits for its own process.
    @Test func aRingGoesToTheProcessItWasOfferedToAndNoOther() throws {
        let ring = try FrameRingWriter(layout: FrameRingLayout(width: 32, height: 16, slotCount: 2))
        let path = "/tmp/ork-ring-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let handedOver = Mutex<Result<Void, ReplayError>?>(nil)
        // Offered to pid 1 (init), never to this test process.
        try RingHandover.offer(ring.descriptors, to: 1, at: path, keepAlive: ring) { result in handedOver.withLock { $0 = result } }
        #expect(throws: ReplayError.self, "another process connecting gets no descriptors") {
            _ = try RingHandover.receive(from: path)
        }
        #expect(handedOver.withLock { $0 } == nil, "nothing was handed over; the offer waits for its own process")
    }

    /// A ring closed with a successor: the reader delivers what it holds, fetches the successor over
    /// its socket (offered to this process's pid) and reads on, sound included, in order; the counters
    /// add up both rings.
    @Test func theReaderFollowsASuccessor() throws {
        let first = try FrameRingWriter(layout: FrameRingLayout(width: 32, height: 16, slotCount: 2))
        let reader = try FrameRingReader(memory: dup(first.memory.descriptor), signal: dup(first.signal.descriptor))
        let second = try FrameRingWriter(layout: FrameRingLayout(width: 64, height: 32, slotCount: 2))
        let path = "/tmp/ork-ring-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let handedOver = Mutex<Result<Void, ReplayError>?>(nil)
        try RingHandover.offer(second.descriptors, to: getpid(), at: path, keepAlive: second) { result in handedOver.withLock { $0 = result } }

        let one = try #require(first.beginFrame())
        first.publish(one, width: 32, height: 16, time: 10, tick: 1)
        [Float](repeating: 0.25, count: 256).withUnsafeBufferPointer { first.writeAudio($0, kind: .app, time: 11) }
        first.close(successor: path)
        let two = try #require(second.beginFrame())
        second.publish(two, width: 64, height: 32, time: 20, tick: 2)
        [Float](repeating: 0.5, count: 256).withUnsafeBufferPointer { second.writeAudio($0, kind: .microphone, time: 21) }
        second.close()

        var seen: [String] = []
        var failure: ReplayError?
        reader.run({ delivery in
            switch delivery {
            case .video(let frame): seen.append("video \(frame.time) \(frame.width)x\(frame.height)")
            case .audio(let chunk): seen.append("audio \(chunk.time) \(chunk.kind) \(chunk.samples[0])")
            }
        }, failed: { failure = $0 })
        #expect(failure == nil)
        #expect(seen == ["video 10 32x16", "audio 11 app 0.25", "video 20 64x32", "audio 21 microphone 0.5"])
        // The offering thread reports after its send returns, which can be after the reader has its
        // descriptors: wait for the report rather than race it.
        let deadline = ContinuousClock.now + .seconds(5)
        while handedOver.withLock({ $0 == nil }) && ContinuousClock.now < deadline { usleep(2_000) }
        #expect(handedOver.withLock { $0.map { (try? $0.get()) != nil } } == true)
        let counters = reader.counters
        #expect(counters.framesWritten == 2 && counters.audioChunksWritten == 2 && counters.closed)
    }

    /// A successor that cannot be fetched (no one offers it) ends delivery with a clear error.
    @Test func aSuccessorThatCannotBeFetchedEndsDeliveryWithAnError() throws {
        let writer = try FrameRingWriter(layout: FrameRingLayout(width: 16, height: 16, slotCount: 1))
        let reader = try FrameRingReader(memory: dup(writer.memory.descriptor), signal: dup(writer.signal.descriptor))
        writer.close(successor: "/tmp/ork-no-such-ring-\(getpid()).sock")
        var failure: ReplayError?
        reader.run({ _ in }, failed: { failure = $0 })
        #expect(failure?.message.contains("successor") == true, "\(String(describing: failure))")
    }
}
