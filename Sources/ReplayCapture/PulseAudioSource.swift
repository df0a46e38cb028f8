import CPulse
import ReplayMedia
package import Logging
import Synchronization
import Foundation

/// Records one PulseAudio source (PipeWire serves the same API) as 48 kHz stereo float samples
/// on its own thread, stamped on the monotonic media clock.
///
/// Timing: the first chunk anchors the source to the clock (read time minus the server's reported
/// latency); after that, samples are counted, so the track has no jitter. If the count and the
/// clock drift apart by more than 20 ms (a sound card whose crystal runs fast or slow), the source
/// re-anchors and says so in the log; the mixer fills or trims the difference, counted.
package final class PulseAudioSource: @unchecked Sendable {
    package enum Device: Sendable {
        /// What the computer plays: the default sink's monitor.
        case systemAudio
        /// The default source: the microphone.
        case microphone

        var pulseName: String? {
            switch self {
            case .systemAudio: "@DEFAULT_MONITOR@"
            case .microphone: nil
            }
        }
    }

    /// Receives chunks: the clock time (ns) of the anchor, the index of the chunk's first sample
    /// counted from that anchor, the interleaved stereo samples, and how long ago (ns) the server
    /// captured the end of this chunk (some sources deliver in bursts: the mixer waits that long).
    package typealias Sink = @Sendable (_ anchor: Int64, _ offset: Int64, _ samples: UnsafeBufferPointer<Float>, _ latency: Int64) -> Void

    package static let sampleRate = 48_000
    package let device: Device
    private let stream: OpaquePointer      // pa_simple*, owned; used by the reading thread only
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    /// Connects to the server. Throws with PulseAudio's reason when it can't (no server, no device).
    package init(device: Device, applicationName: String = "replayd", logger: Logger) throws(AudioError) {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(Self.sampleRate), channels: 2)
        let chunkBytes = UInt32(Self.sampleRate / 100 * 2 * MemoryLayout<Float>.size)   // 10 ms
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max,
                                        minreq: UInt32.max, fragsize: chunkBytes)
        var error: Int32 = 0
        let streamName = device == .systemAudio ? "system audio" : "microphone"
        guard let stream = pa_simple_new(nil, applicationName, PA_STREAM_RECORD, device.pulseName, streamName,
                                         &spec, nil, &attributes, &error) else {
            throw AudioError(message: String(cString: pa_strerror(error)))
        }
        self.stream = stream
        self.device = device
        self.logger = logger
    }

    deinit {
        if started.load(ordering: .acquiring) { done.wait() }
        pa_simple_free(stream)
    }

    /// Starts the reading thread; `sink` gets every chunk until `stop()`.
    package func start(_ sink: @escaping Sink) {
        started.store(true, ordering: .releasing)
        let thread = Thread { [self] in
            self.readLoop(sink)
            self.done.signal()
        }
        thread.name = "replayd-audio-\(device == .systemAudio ? "system" : "mic")"
        thread.start()
    }

    /// Asks the thread to stop after the chunk it is reading (≤ 10 ms) and waits for it.
    package func stop() {
        guard started.load(ordering: .acquiring), !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        done.wait()
        done.signal()   // deinit waits too
    }

    private func readLoop(_ sink: Sink) {
        let frames = Self.sampleRate / 100
        var buffer = [Float](repeating: 0, count: frames * 2)
        var anchor: Int64 = 0
        var counted: Int64 = 0
        var driftStrikes = 0
        while !stopping.load(ordering: .relaxed) {
            var error: Int32 = 0
            let status = buffer.withUnsafeMutableBytes { pa_simple_read(stream, $0.baseAddress, $0.count, &error) }
            let now = MonotonicClock.now()
            guard status >= 0 else {
                logger.error("audio \(device) stopped: \(String(cString: pa_strerror(error)))")
                return
            }
            let latency = Int64(pa_simple_get_latency(stream, &error)) * 1000
            // The end of this chunk was captured `latency` ago.
            let measuredStart = now - latency - Int64(frames) * 1_000_000_000 / Int64(Self.sampleRate)
            if counted == 0 {
                anchor = measuredStart
            } else {
                let countedStart = anchor + counted * 1_000_000_000 / Int64(Self.sampleRate)
                if abs(measuredStart - countedStart) > 20_000_000 {
                    driftStrikes += 1
                    if driftStrikes >= 50 {   // half a second of consistent drift, not one late wake-up
                        logger.notice("audio \(device) drifted \((measuredStart - countedStart) / 1_000_000) ms from the clock; re-anchored")
                        anchor = measuredStart - counted * 1_000_000_000 / Int64(Self.sampleRate)
                        driftStrikes = 0
                    }
                } else {
                    driftStrikes = 0
                }
            }
            buffer.withUnsafeBufferPointer { sink(anchor, counted, $0, latency) }
            counted += Int64(frames)
        }
    }
}

/// PulseAudio could not be used; `message` is its reason.
package struct AudioError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}
