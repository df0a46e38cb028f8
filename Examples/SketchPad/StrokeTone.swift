import CPulse
import Foundation
import Synchronization

/// The sound of SketchPad's strokes: one PulseAudio playback stream, open for the app's whole life
/// (so that the app's own recording, which follows its sink-inputs, has it from the first moment),
/// written on a thread of its own: silence, and a tone while a stroke is being drawn (at least
/// `minimumSeconds` of it, faded in and out so that it does not click).
///
/// `pa_simple_write` blocks until the server takes the block: the sink's clock paces the thread, and
/// the cooperative pool never waits on it.
final class StrokeTone: Sendable {
    struct State {
        /// Samples of tone still to play (counting down), and whether the stroke still goes on.
        var remaining = 0
        var sounding = false
        var stopped = false
    }

    let frequency: Double
    let minimumSeconds: Double
    private let state = Mutex(State())
    private static let rate = 48_000
    /// 10 ms a block: the tone starts at most a block (plus the 30 ms buffer) after the stroke.
    private static let blockFrames = 480

    init(frequency: Double, minimumSeconds: Double = 0.35) {
        self.frequency = frequency
        self.minimumSeconds = minimumSeconds
    }

    /// Opens the stream and starts writing; returns at once. A missing sound server is reported on
    /// standard error and the app draws on without sound.
    func start() {
        let thread = Thread { [self] in self.play() }
        thread.name = "stroke tone"
        thread.start()
    }

    /// A stroke began: the tone sounds until `strokeEnded()` and at least `minimumSeconds`.
    func strokeBegan() {
        state.withLock { state in
            state.sounding = true
            state.remaining = max(state.remaining, Int(minimumSeconds * Double(Self.rate)))
        }
    }

    func strokeEnded() { state.withLock { $0.sounding = false } }

    func stop() { state.withLock { $0.stopped = true } }

    private func play() {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(Self.rate), channels: 2)
        var attributes = pa_buffer_attr(maxlength: .max, tlength: UInt32(pa_usec_to_bytes(30_000, &spec)),
                                        prebuf: .max, minreq: .max, fragsize: .max)
        var error: Int32 = 0
        guard let stream = pa_simple_new(nil, "SketchPad", PA_STREAM_PLAYBACK, nil, "stroke tones",
                                         &spec, nil, &attributes, &error) else {
            FileHandle.standardError.write(Data("sketchpad: no sound (PulseAudio: \(String(cString: pa_strerror(error))))\n".utf8))
            return
        }
        defer { pa_simple_free(stream) }
        let step = 2 * Double.pi * frequency / Double(Self.rate)
        let fadeFrames = Double(Self.rate) * 0.01
        var phase = 0.0
        var gain = 0.0
        var samples = [Float](repeating: 0, count: Self.blockFrames * 2)
        while true {
            let (stopped, sounding) = state.withLock { state -> (Bool, Bool) in
                let sounding = state.sounding || state.remaining > 0
                state.remaining = max(0, state.remaining - Self.blockFrames)
                return (state.stopped, sounding)
            }
            if stopped { break }
            let target = sounding ? 1.0 : 0.0
            for i in 0..<Self.blockFrames {
                gain += (target - gain) / fadeFrames
                let value = gain > 0.0005 ? Float(0.3 * gain * sin(phase)) : 0
                phase += step
                samples[2 * i] = value
                samples[2 * i + 1] = value
            }
            phase = phase.truncatingRemainder(dividingBy: 2 * Double.pi)
            if samples.withUnsafeBytes({ pa_simple_write(stream, $0.baseAddress, $0.count, &error) }) < 0 {
                FileHandle.standardError.write(Data("sketchpad: sound stopped (PulseAudio: \(String(cString: pa_strerror(error))))\n".utf8))
                return
            }
        }
    }
}
