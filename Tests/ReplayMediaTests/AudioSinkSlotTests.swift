import Testing
@testable import ReplayMedia
import Synchronization

@Suite struct AudioSinkSlotTests {
    /// A slot may be read any number of times (a reader once fetched it for every 10 ms chunk: a
    /// million fetches is under three hours of sound), and the sink must still be one call away.
    @Test func aSinkFetchedAMillionTimesIsStillOneCallAway() {
        let slot = AudioSinkSlot()
        #expect(slot.current == nil)
        let total = Mutex<Float>(0)
        slot.set { _, _, samples, _ in total.withLock { $0 += samples.reduce(0, +) } }
        var sink: AudioSink?
        for _ in 0..<1_000_000 { sink = slot.current }
        [Float](repeating: 0.5, count: 4).withUnsafeBufferPointer { sink?(0, 0, $0, 0) }
        #expect(total.withLock { $0 } == 2)
    }
}
