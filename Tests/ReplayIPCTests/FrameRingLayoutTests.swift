import Testing
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
        base.storeBytes(of: 2 as UInt32, toByteOffset: 4, as: UInt32.self)
        #expect { try FrameRingLayout(reading: base, size: size) } throws: { ($0 as? ReplayError)?.message.contains("version 2") == true }
        base.storeBytes(of: 1 as UInt32, toByteOffset: 4, as: UInt32.self)
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
        writer.publish(first, time: 1, tick: 1)
        let second = try #require(writer.beginFrame())
        #expect(second.index != first.index)
        #expect(writer.beginFrame() == nil, "one ready, one being written: none free")
        writer.publish(second, time: 2, tick: 2)
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
}
