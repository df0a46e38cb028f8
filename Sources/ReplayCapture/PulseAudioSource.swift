import CPulse
package import ReplayMedia
package import Logging
import Synchronization
import Foundation

/// Records the default PulseAudio source, the microphone (PipeWire serves the same API), as 48 kHz
/// stereo float samples on its own thread, stamped on the monotonic media clock. (What the computer
/// plays is `SystemSoundSource`, read on the connection that follows the sink-inputs.)
///
/// Timing: `ArrivalClock` anchors the source to the clock from when its chunks arrive; after that,
/// samples are counted, so the track has no jitter. If the count and the clock drift apart by more
/// than 20 ms (a sound card whose crystal runs fast or slow), the source re-anchors and says so in
/// the log; the mixer fills or trims the difference, counted.
package final class PulseAudioSource: @unchecked Sendable {
    package static let sampleRate = 48_000
    private let stream: OpaquePointer      // pa_simple*, owned; used by the reading thread only
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    private let delivering = Atomic<Bool>(false)

    /// True once the server has sent the first chunk (some take over a second to start).
    package var hasData: Bool { delivering.load(ordering: .acquiring) }

    /// Connects to the server. Throws with PulseAudio's reason when it can't (no server, no device).
    package init(applicationName: String = "replayd", logger: Logger) throws(AudioError) {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(Self.sampleRate), channels: 2)
        let chunkBytes = UInt32(Self.sampleRate / 100 * 2 * MemoryLayout<Float>.size)   // 10 ms
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max,
                                        minreq: UInt32.max, fragsize: chunkBytes)
        var error: Int32 = 0
        guard let stream = pa_simple_new(nil, applicationName, PA_STREAM_RECORD, nil, "microphone",
                                         &spec, nil, &attributes, &error) else {
            throw AudioError(message: String(cString: pa_strerror(error)))
        }
        self.stream = stream
        self.logger = logger
    }

    deinit {
        // The reading thread holds `self`: this runs once it has ended (and signalled).
        if started.load(ordering: .acquiring) { done.wait() }
        pa_simple_free(stream)
    }

    /// How long `stop()` waits for the reading thread's last chunk: a chunk is 10 ms, so only a
    /// server that stopped sending takes longer, and a recording's stop does not wait on it.
    private static let stopTimeout = DispatchTimeInterval.seconds(2)

    /// Starts the reading thread. Chunks are held until `deliver(to:)` names where they go (and
    /// until the source is anchored to the clock).
    package func start() {
        started.store(true, ordering: .releasing)
        let thread = Thread { [self] in
            self.readLoop()
            self.done.signal()
        }
        thread.name = "replayd-audio-mic"
        thread.start()
    }

    /// From now on (held chunks first), every chunk goes to `sink`, until `stop()`. Called once.
    package func deliver(to sink: @escaping AudioSink) {
        sinkSlot.set(sink)
    }

    private let sinkSlot = AudioSinkSlot()

    /// Asks the thread to stop after the chunk it is reading (≤ 10 ms) and waits for it, at most
    /// `stopTimeout` (a server that stopped sending leaves the thread blocked in its read: logged).
    package func stop() {
        guard started.load(ordering: .acquiring), !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        guard done.wait(timeout: .now() + Self.stopTimeout) == .success else {
            logger.warning("audio microphone: the sound server sent nothing for \(Self.stopTimeout) at the stop; the recording ends without waiting for it")
            return
        }
        done.signal()   // deinit waits too
    }

    private func readLoop() {
        let frames = Self.sampleRate / 100
        var buffer = [Float](repeating: 0, count: frames * 2)
        var clock = ArrivalClock(sampleRate: Self.sampleRate)
        var held: [[Float]] = []   // chunks read before the live edge was found
        var delivered: Int64 = 0
        var sink: AudioSink?   // fetched from `sinkSlot` until installed, then kept: it never changes
        while !stopping.load(ordering: .relaxed) {
            var error: Int32 = 0
            let before = MonotonicClock.now()
            let status = buffer.withUnsafeMutableBytes { pa_simple_read(stream, $0.baseAddress, $0.count, &error) }
            let after = MonotonicClock.now()
            guard status >= 0 else {
                logger.error("audio microphone stopped: \(String(cString: pa_strerror(error)))")
                return
            }
            let latency = Int64(pa_simple_get_latency(stream, &error)) * 1000
            delivering.store(true, ordering: .releasing)
            if let shift = clock.chunkArrived(frames: Int64(frames), readStarted: before, readEnded: after) {
                logger.notice("audio microphone drifted \(shift / 1_000_000) ms from the clock; re-anchored")
            }
            if sink == nil { sink = sinkSlot.current }
            guard let clockAnchor = clock.anchor, let sink else {
                held.append(buffer)
                continue
            }
            let anchor = clockAnchor
            for chunk in held {
                chunk.withUnsafeBufferPointer { sink(anchor, delivered, $0, latency) }
                delivered += Int64(frames)
            }
            held.removeAll()
            buffer.withUnsafeBufferPointer { sink(anchor, delivered, $0, latency) }
            delivered += Int64(frames)
        }
    }
}

/// Places a sound source's samples on the monotonic clock from when its chunks arrive.
///
/// A server's reported latency is not to be trusted for this (a fresh PulseAudio reports 360 ms
/// for a monitor whose data arrives in real time, then stops updating it). What can be trusted: a
/// chunk is never captured after it arrives. While reads return at once, the client is draining a
/// backlog (some sources deliver in bursts of seconds); a read that has to wait means the backlog is
/// gone, and the chunk read just before it was the freshest: its end was captured about when it
/// arrived (the first chunk of all may be a burst's stale head, so it anchors nothing). Each such moment gives an observation of the anchor (the clock time of sample 0); the
/// first one anchors the source (earlier chunks are held until then), and afterwards the lowest
/// observation of each 3-second window says whether the count has drifted from the clock (a sound
/// card's crystal): beyond 20 ms, the anchor moves and the caller logs it. Pure: no I/O.
package struct ArrivalClock: Sendable {
    package let sampleRate: Int64
    /// Clock time (ns) of sample 0, once known.
    package private(set) var anchor: Int64?
    private var counted: Int64 = 0
    private var previousArrival: Int64?
    private var windowStart: Int64 = 0
    private var windowLowest: Int64?

    package static let waitThreshold: Int64 = 3_000_000        // a read that blocked this long waited for data
    package static let driftWindow: Int64 = 3_000_000_000
    package static let driftTolerance: Int64 = 20_000_000

    package init(sampleRate: Int) {
        self.sampleRate = Int64(sampleRate)
    }

    /// Records a chunk of `frames` samples read between `readStarted` and `readEnded`. Returns how
    /// far (ns) the anchor moved when it had to be corrected for drift.
    package mutating func chunkArrived(frames: Int64, readStarted: Int64, readEnded: Int64) -> Int64? {
        defer {
            counted += frames
            previousArrival = readEnded
        }
        let waited = readEnded - readStarted >= Self.waitThreshold
        guard waited else { return nil }
        // The freshest chunk is the one before this read. The very first chunk tells nothing: it
        // may be the stale head of a burst, so it never anchors the source.
        guard let previousArrival, counted > 0 else { return nil }
        let observation = previousArrival - nanoseconds(counted)
        guard let current = anchor else {
            anchor = observation
            windowStart = readEnded
            return nil
        }
        windowLowest = min(windowLowest ?? observation, observation)
        guard readEnded - windowStart >= Self.driftWindow, let lowest = windowLowest else { return nil }
        windowStart = readEnded
        windowLowest = nil
        let drift = lowest - current
        guard abs(drift) > Self.driftTolerance else { return nil }
        anchor = lowest
        return drift
    }

    private func nanoseconds(_ samples: Int64) -> Int64 { samples * 1_000_000_000 / sampleRate }
}

/// PulseAudio could not be used; `message` is its reason.
package struct AudioError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}
