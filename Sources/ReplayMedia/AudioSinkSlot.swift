import Synchronization

/// Where a sound source hands its chunks: the chunk's anchor on the media clock (ns), its offset in
/// samples from that anchor, the interleaved stereo samples, and how long ago (ns) the server
/// captured the end of the chunk (some sources deliver in bursts: the mixer waits that long).
package typealias AudioSink = @Sendable (_ anchor: Int64, _ offset: Int64, _ samples: UnsafeBufferPointer<Float>, _ latency: Int64) -> Void

/// The sink a sound source's reader thread fetches (until one is installed), installed by another
/// thread.
///
/// The closure lives in a class, and the lock guards only the reference to it. Kept directly in a
/// `Mutex`, a closure is stored in the generic form: every `withLock` unwrapped it for its body and
/// wrapped it again when writing it back, two reabstraction thunks more on each fetch. A hundred
/// fetches a second made each call deeper, and after 872 s of sound the call overflowed the reader
/// thread's stack (SIGSEGV; the thunks were also the ~20 KB/s the recorder grew by).
package final class AudioSinkSlot: Sendable {
    private final class Box: Sendable {
        let sink: AudioSink
        init(_ sink: @escaping AudioSink) { self.sink = sink }
    }

    private let slot = Mutex<Box?>(nil)

    package init() {}

    package func set(_ sink: @escaping AudioSink) {
        let box = Box(sink)
        slot.withLock { $0 = box }
    }

    package var current: AudioSink? {
        slot.withLock { $0 }?.sink
    }
}
