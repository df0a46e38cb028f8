import Testing
import Foundation
import Logging
@testable import ReplayEngine
@testable import ReplayMedia
import ReplayTesting
import ReplayCapture

/// The privacy model's hardest moment for sound: a protected sink-input that *begins* while the
/// system sound is recorded. Its first samples reach the sink's monitor a moment after PulseAudio
/// announced the sink-input, and no block holding them may be cut before that announcement has
/// been read. Three protected players start and stop during a recording, while an unprotected one
/// plays throughout; every 21 ms of the recording is checked for the protected tone. A recording of
/// the sink's monitor by ffmpeg, side by side, shows the protected tone was really played each time.
///
/// In `ApplicationCaptureTests`' serialized suite: it points this process's PulseAudio variables
/// at its own server, as the other in-process sound tests there do.
extension ApplicationCaptureTests {
    static let hidden = 500.0, heard = 1500.0

    /// Where a tone begins: 50 ms windows, the first of a run above a tenth of full scale.
    static func starts(of frequency: Double, in signal: AudioSignal) -> [Double] {
        var result: [Double] = []
        var on = false
        var start = signal.startTime
        while start + 0.05 <= signal.endTime {
            let now = signal.slice(from: start, to: start + 0.05).amplitude(of: frequency) > 0.1
            if now, !on { result.append(start) }
            on = now
            start += 0.05
        }
        return result
    }

    /// `lookupDelay`: how long (ms) replayd's question about each announced sink-input waits before
    /// it is asked. At 300 ms, the protected players' first 300 ms reach the sink's monitor long before
    /// replayd knows they are protected: the system sound must be held meanwhile, not let through
    /// (let through, the tone stood 0.42 above its sides).
    @Test(arguments: [0, 300])
    func noBlockHoldsTheFirstSamplesOfAProtectedSoundThatBeginsMidRecording(lookupDelay: Int) async throws {
        SinkInputAudioSource.lookupDelayForTests = lookupDelay
        defer { SinkInputAudioSource.lookupDelayForTests = 0 }
        let configuration = TestEnvironment.Configuration(width: 320, height: 180, audio: .pulseAudio, content: nil)
        try await TestEnvironment.with(configuration) { environment in
            let pulse = try #require(environment.pulse)
            Self.useTheTestsPulseAudio(environment)
            let plain = try await TestApp.start(on: environment.xvfb, pulseEnvironment: pulse.clientEnvironment,
                                                options: TestApp.Options(colour: 0x0000ff, rect: PixelRect(x: 200, y: 20, width: 100, height: 80),
                                                                         tone: Self.heard))
            defer { plain.kill() }
            // The control: everything the sink plays, protected or not, as a listener hears it.
            let control = environment.outputPath("monitor.wav")
            var controlEnvironment = ProcessInfo.processInfo.environment
            controlEnvironment.merge(pulse.clientEnvironment) { $1 }
            let listener = try BackgroundProcess("ffmpeg", arguments: ["-nostdin", "-v", "error", "-f", "pulse", "-i", "main.monitor",
                                                                       "-ac", "1", "-ar", "48000", "-t", "14", control],
                                                 environment: controlEnvironment)
            // Recording before the first protected player starts: on a loaded machine ffmpeg took over a
            // second to begin (a CI run's control heard only the last two of the three).
            let listening = ContinuousClock.now + .seconds(15)
            while ((try? FileManager.default.attributesOfItem(atPath: control)[.size] as? Int) ?? 0) < 20_000, ContinuousClock.now < listening {
                try await Task.sleep(for: .milliseconds(50))
            }
            let file = environment.outputPath("system-sound.mp4")
            let engine = try await RecordingEngine.prepare(
                configuration: EngineConfiguration(video: .screen(display: environment.xvfb.display), audio: [.systemMix],
                                                   audioRequired: true, durationSeconds: 8, quality: .low, encoder: .x264),
                logger: Logger(label: "test.protected-onset"))
            try engine.attach(try MovieWriter(path: file, logger: Logger(label: "test.protected-onset")))
            let recording = Task { try await engine.run() }

            var options = TestApp.Options(colour: 0xff0000, rect: PixelRect(x: 20, y: 20, width: 100, height: 80), tone: Self.hidden)
            options.protectedAudio = true
            for (wait, play) in [(1.0, 0.9), (0.9, 0.7), (0.9, 1.0)] {
                try await Task.sleep(for: .seconds(wait))
                let protected = try await TestApp.start(on: environment.xvfb, pulseEnvironment: pulse.clientEnvironment, options: options)
                try await Task.sleep(for: .seconds(play))
                await protected.stop()
            }
            try await recording.value
            _ = try await listener.waitForExit(timeout: .seconds(15))

            let monitor = try await ToneAnalyzer.decode(file: control)
            let played = Self.starts(of: Self.hidden, in: monitor)
            #expect(played.count >= 3, "the sink played the protected tone three times: onsets \(played) in \(monitor.duration) s")

            let sound = try await ToneAnalyzer.decode(file: file)
            let block = 1024.0 / 48_000
            // How far the protected tone stands above the spectrum on either side (300 and 700 Hz, where
            // nothing plays): where the system sound switches between the sink's monitor and the
            // unprotected mix (a protected player starts or ends) there is a click, whose energy is
            // spread over all frequencies alike (0.018/0.019/0.021 at 300/500/700 in one run); the
            // tone itself, even a few milliseconds of it, stands out at 500.
            var loudest = (time: 0.0, standing: 0.0, amplitudes: (0.0, 0.0, 0.0))
            var quiet = 0, windows = 0
            var start = 0.1
            while start + block <= sound.endTime - 0.1 {
                let window = sound.slice(from: start, to: start + block)
                let amplitudes = (window.amplitude(of: 300), window.amplitude(of: Self.hidden), window.amplitude(of: 700))
                let standing = amplitudes.1 - max(amplitudes.0, amplitudes.2)
                if standing > loudest.standing { loudest = (start, standing, amplitudes) }
                if window.amplitude(of: Self.heard) < 0.05 { quiet += 1 }
                windows += 1
                start += block / 2
            }
            #expect(loudest.standing < 0.01,
                    "the protected tone is in no block: it stands \(loudest.standing) above its sides at \(loudest.time) s (300/500/700 Hz: \(loudest.amplitudes))")
            #expect(quiet <= windows / 20, "the unprotected tone plays on throughout: \(quiet) of \(windows) windows without it")
            await plain.stop()
        }
    }
}
