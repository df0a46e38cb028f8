import CPulse
import Foundation
import Synchronization

/// Plays the test tones on its own thread through `pa_simple` with a 20 ms buffer: a 1000 Hz beep
/// (amplitude 0.5) for the first 100 ms of every whole second from 1 s on, and a 440 Hz "system"
/// tone (amplitude 0.1) the rest of the time. The beep starts when the flash is drawn: each chunk's
/// time on the content's clock is when it will be heard (now + the stream's latency), kept
/// continuous from chunk to chunk and re-anchored when it drifts by more than 2 ms.
final class TonePlayer: Sendable {
    static let sampleRate = 48_000
    static let chunkFrames = 240  // 5 ms
    static let beepFrequency = 1000.0
    static let beepAmplitude: Float = 0.5
    static let beepSeconds = 0.1
    static let toneFrequency = 440.0
    static let toneAmplitude: Float = 0.1

    private let startNanoseconds: UInt64
    private let stopFlag = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)

    init(startNanoseconds: UInt64) {
        self.startNanoseconds = startNanoseconds
    }

    func start() {
        started.store(true, ordering: .releasing)
        let thread = Thread { [self] in
            self.play()
            self.finished.store(true, ordering: .releasing)
        }
        thread.name = "tones"
        thread.start()
    }

    /// Asks the thread to end and waits for it (at most one second).
    func stop() {
        guard started.load(ordering: .acquiring) else { return }
        stopFlag.store(true, ordering: .releasing)
        let deadline = MonotonicClock.nowNanoseconds() + 1_000_000_000
        while !finished.load(ordering: .acquiring) && MonotonicClock.nowNanoseconds() < deadline {
            MonotonicClock.sleep(untilNanoseconds: MonotonicClock.nowNanoseconds() + 5_000_000)
        }
    }

    private func play() {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(Self.sampleRate), channels: 2)
        var attributes = pa_buffer_attr(maxlength: .max, tlength: UInt32(pa_usec_to_bytes(20_000, &spec)),
                                        prebuf: .max, minreq: .max, fragsize: .max)
        var error: Int32 = 0
        guard let stream = pa_simple_new(nil, "replay-testcontent", PA_STREAM_PLAYBACK, nil, "test tones",
                                         &spec, nil, &attributes, &error) else {
            printError("replay-testcontent: no sound, PulseAudio refused a playback stream: \(String(cString: pa_strerror(error)))")
            return
        }
        defer { pa_simple_free(stream) }

        var beepPhase = 0.0, tonePhase = 0.0
        let beepStep = 2 * Double.pi * Self.beepFrequency / Double(Self.sampleRate)
        let toneStep = 2 * Double.pi * Self.toneFrequency / Double(Self.sampleRate)
        let chunkSeconds = Double(Self.chunkFrames) / Double(Self.sampleRate)
        var samples = [Float](repeating: 0, count: Self.chunkFrames * 2)
        var nextChunkTime: Double?

        while !stopFlag.load(ordering: .acquiring) {
            let latency = Double(pa_simple_get_latency(stream, &error)) / 1e6
            let now = Double(MonotonicClock.nowNanoseconds() &- startNanoseconds) / 1e9
            let heardAt = now + latency
            var chunkTime = nextChunkTime ?? heardAt
            if abs(chunkTime - heardAt) > 0.002 { chunkTime = heardAt }
            for i in 0..<Self.chunkFrames {
                let t = chunkTime + Double(i) / Double(Self.sampleRate)
                let second = t.rounded(.down)
                let value: Float
                if second >= 1 && t - second < Self.beepSeconds {
                    value = Self.beepAmplitude * Float(sin(beepPhase))
                } else {
                    value = Self.toneAmplitude * Float(sin(tonePhase))
                }
                beepPhase += beepStep
                tonePhase += toneStep
                samples[2 * i] = value
                samples[2 * i + 1] = value
            }
            beepPhase = beepPhase.truncatingRemainder(dividingBy: 2 * Double.pi)
            tonePhase = tonePhase.truncatingRemainder(dividingBy: 2 * Double.pi)
            nextChunkTime = chunkTime + chunkSeconds
            let written = samples.withUnsafeBytes { pa_simple_write(stream, $0.baseAddress, $0.count, &error) }
            if written < 0 {
                printError("replay-testcontent: sound stopped: \(String(cString: pa_strerror(error)))")
                return
            }
        }
    }
}
