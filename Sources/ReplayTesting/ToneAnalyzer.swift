import Foundation

/// Mono audio samples on a file's timeline.
public struct AudioSignal: Sendable {
    public var samples: [Float]
    public var sampleRate: Int
    /// The time (seconds from the file's start) of `samples[0]`.
    public var startTime: Double

    public init(samples: [Float], sampleRate: Int, startTime: Double = 0) {
        self.samples = samples
        self.sampleRate = sampleRate
        self.startTime = startTime
    }

    public var duration: Double { Double(samples.count) / Double(sampleRate) }
    public var endTime: Double { startTime + duration }

    /// The samples between two times of the file's timeline (clipped to what there is).
    public func slice(from t0: Double, to t1: Double) -> AudioSignal {
        let i0 = max(0, min(samples.count, Int(((t0 - startTime) * Double(sampleRate)).rounded())))
        let i1 = max(i0, min(samples.count, Int(((t1 - startTime) * Double(sampleRate)).rounded())))
        return AudioSignal(samples: Array(samples[i0..<i1]), sampleRate: sampleRate,
                           startTime: startTime + Double(i0) / Double(sampleRate))
    }

    /// Root mean square, 0…1 full scale.
    public var rms: Double {
        guard !samples.isEmpty else { return 0 }
        return (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples.count)).squareRoot()
    }

    /// The amplitude (0…1 full scale) of a sine at `frequency`: a Hann-windowed Goertzel filter.
    public func amplitude(of frequency: Double) -> Double {
        Self.goertzelAmplitude(samples[...], frequency: frequency, sampleRate: sampleRate, hann: true)
    }

    /// The share of the signal's power (0…1) that is a sine at `frequency`; 0 for silence.
    public func relativePower(of frequency: Double) -> Double {
        let meanSquare = rms * rms
        guard meanSquare > 1e-12 else { return 0 }
        let a = amplitude(of: frequency)
        return min(1, a * a / 2 / meanSquare)
    }

    /// Whether a tone at `frequency` is present: louder than `ToneAnalyzer.amplitudeFloor`
    /// (−54 dBFS) and standing `ToneAnalyzer.peakRatio` (20 dB) above the spectrum beside it
    /// (±20…50 Hz), so that a quiet tone under a loud one still counts and noise does not.
    public func isPresent(_ frequency: Double) -> Bool {
        let a = amplitude(of: frequency)
        guard a >= ToneAnalyzer.amplitudeFloor else { return false }
        return a >= ToneAnalyzer.peakRatio * surroundingAmplitude(of: frequency)
    }

    /// The mean amplitude at 20, 30, 40 and 50 Hz either side of `frequency`: the floor a tone
    /// there stands on.
    public func surroundingAmplitude(of frequency: Double) -> Double {
        let offsets: [Double] = [-50, -40, -30, -20, 20, 30, 40, 50]
        return offsets.reduce(0) { $0 + amplitude(of: frequency + $1) } / Double(offsets.count)
    }

    /// The times (file timeline, seconds) where a tone at `frequency` starts after at least
    /// `minimumGap` seconds since the last start. 10 ms rectangular windows every 5 ms; within the
    /// window that crosses half the peak amplitude the start is placed by the amplitude's linear rise.
    /// An onset needs sound (not digital silence) in the 10 ms before it, so that the start of the
    /// stream or the end of a gap is not taken for one.
    public func onsets(of frequency: Double, minimumGap: Double = 0.5) -> [Double] {
        let window = sampleRate / 100, hop = sampleRate / 200
        guard samples.count >= window else { return [] }
        var amplitudes: [Double] = []
        var start = 0
        while start + window <= samples.count {
            amplitudes.append(Self.goertzelAmplitude(samples[start..<(start + window)], frequency: frequency,
                                                     sampleRate: sampleRate, hann: false))
            start += hop
        }
        // The tone's full amplitude: a high percentile, so that one odd window does not set it.
        let sorted = amplitudes.sorted()
        let peak = sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.98))]
        guard peak >= ToneAnalyzer.amplitudeFloor else { return [] }
        let threshold = peak / 2
        var result: [Double] = []
        for k in 1..<amplitudes.count where amplitudes[k] >= threshold && amplitudes[k - 1] < threshold {
            // Sound (not digital silence) just before: the start of the stream or of a gap is no onset.
            let before = samples[max(0, k * hop - window)..<(k * hop)]
            guard before.contains(where: { abs($0) > 1e-4 }) else { continue }
            let windowStart = startTime + Double(k * hop) / Double(sampleRate)
            let windowLength = Double(window) / Double(sampleRate)
            let t = windowStart + windowLength * (1 - min(1, amplitudes[k] / peak))
            if let last = result.last, t - last < minimumGap { continue }
            result.append(t)
        }
        return result
    }

    static func goertzelAmplitude(_ x: ArraySlice<Float>, frequency: Double, sampleRate: Int, hann: Bool) -> Double {
        let n = x.count
        guard n > 1 else { return 0 }
        let omega = 2 * Double.pi * frequency / Double(sampleRate)
        let coefficient = 2 * cos(omega)
        var s1 = 0.0, s2 = 0.0, windowSum = 0.0
        for (i, sample) in x.enumerated() {
            let w = hann ? 0.5 - 0.5 * cos(2 * Double.pi * Double(i) / Double(n - 1)) : 1
            windowSum += w
            let s = w * Double(sample) + coefficient * s1 - s2
            s2 = s1
            s1 = s
        }
        let power = max(0, s1 * s1 + s2 * s2 - coefficient * s1 * s2)
        return 2 * power.squareRoot() / windowSum
    }
}

/// Finds known tones in a file's audio and the test content's flashes in its video, by decoding
/// with ffmpeg. Times are seconds from the start of the file, as a player shows them.
///
/// An instance holds one decoded stretch of one audio stream: `ToneAnalyzer(file:streamIndex:from:to:)`
/// then `isPresent(frequency:)`; the static functions decode and answer in one go.
public struct ToneAnalyzer: Sendable {
    /// The decoded audio.
    public let signal: AudioSignal

    public init(signal: AudioSignal) {
        self.signal = signal
    }

    /// Decodes the `streamIndex`-th audio stream (0 = the first audio stream, whatever the video
    /// streams) from `t0` to `t1`, blocking the calling thread: for synchronous tests.
    public init(file: String, streamIndex: Int = 0, from t0: Double = 0, to t1: Double? = nil) throws {
        let result = try ProcessRunner.run("ffmpeg", arguments: Self.audioArguments(file, streamIndex), timeout: .seconds(180))
        signal = try Self.parseAudio(result, file: file, stream: streamIndex, from: t0, to: t1)
    }

    /// The same, without blocking.
    public static func load(file: String, streamIndex: Int = 0, from t0: Double = 0, to t1: Double? = nil) async throws -> ToneAnalyzer {
        ToneAnalyzer(signal: try await decode(file: file, audioStream: streamIndex, from: t0, to: t1))
    }

    /// Whether a tone at `frequency` is present (see ``AudioSignal/isPresent(_:)``).
    public func isPresent(frequency: Double) -> Bool { signal.isPresent(frequency) }
    /// The share of the power at `frequency`, 0…1.
    public func relativePower(frequency: Double) -> Double { signal.relativePower(of: frequency) }
    /// The amplitude of a sine at `frequency`, 0…1 full scale.
    public func amplitude(frequency: Double) -> Double { signal.amplitude(of: frequency) }
    /// Where a tone at `frequency` starts.
    public func onsets(frequency: Double) -> [Double] { signal.onsets(of: frequency) }

    /// The least amplitude a tone must have to count as present (−54 dBFS).
    public static let amplitudeFloor = 0.002
    /// How far (as an amplitude ratio, 10 = 20 dB) a present tone stands above the spectrum beside it.
    public static let peakRatio = 10.0

    /// The `audioStream`-th audio stream (0 = first) from `t0` to `t1` (nil: the end), mono f32 at
    /// 48 kHz. Gaps and a late start are filled with silence (`aresample=async=1:first_pts=0`), so
    /// that sample i is at i / 48000 s.
    public static func decode(file: String, audioStream: Int = 0, from t0: Double = 0, to t1: Double? = nil) async throws -> AudioSignal {
        let result = try await ProcessRunner.run("ffmpeg", arguments: audioArguments(file, audioStream), timeout: .seconds(180))
        return try parseAudio(result, file: file, stream: audioStream, from: t0, to: t1)
    }

    private static func audioArguments(_ file: String, _ audioStream: Int) -> [String] {
        ["-nostdin", "-v", "error", "-i", file, "-map", "0:a:\(audioStream)",
         "-af", "aresample=48000:async=1:first_pts=0", "-ac", "1", "-f", "f32le", "-"]
    }

    private static func parseAudio(_ result: ProcessResult, file: String, stream: Int, from t0: Double, to t1: Double?) throws -> AudioSignal {
        guard result.succeeded else { throw HarnessError("ffmpeg could not decode audio stream \(stream) of \(file): \(result.stderr)") }
        var samples = [Float](repeating: 0, count: result.standardOutput.count / MemoryLayout<Float>.size)
        samples.withUnsafeMutableBytes { _ = result.standardOutput.copyBytes(to: $0) }
        let signal = AudioSignal(samples: samples, sampleRate: 48_000)
        return signal.slice(from: t0, to: t1 ?? signal.endTime)
    }

    /// Whether a tone at `frequency` is in the `audioStream`-th audio stream between `t0` and `t1`.
    public static func isPresent(frequency: Double, in file: String, audioStream: Int = 0,
                                 from t0: Double = 0, to t1: Double? = nil) async throws -> Bool {
        try await decode(file: file, audioStream: audioStream, from: t0, to: t1).isPresent(frequency)
    }

    /// Where a tone at `frequency` starts (5 ms windows), e.g. the beeps at 1000 Hz.
    public static func onsets(frequency: Double, in file: String, audioStream: Int = 0) async throws -> [Double] {
        try await decode(file: file, audioStream: audioStream).onsets(of: frequency)
    }

    /// Each video frame's time and mean luma (0…255), from a 64x36 grey version of the video.
    public static func frameLuma(file: String) async throws -> [(time: Double, luma: Double)] {
        let result = try await ProcessRunner.run("ffmpeg", arguments: [
            "-nostdin", "-hide_banner", "-loglevel", "info", "-i", file, "-map", "0:v:0",
            "-vf", "scale=64:36,format=gray,showinfo", "-fps_mode", "passthrough", "-f", "rawvideo", "-",
        ], timeout: .seconds(180))
        guard result.succeeded else { throw HarnessError("ffmpeg could not decode the video of \(file): \(result.stderr.suffix(2000))") }
        let times: [Double] = result.stderr.split(separator: "\n").compactMap { line in
            guard line.contains("showinfo"), let range = line.range(of: "pts_time:") else { return nil }
            return Double(line[range.upperBound...].prefix { !$0.isWhitespace })
        }
        let frameBytes = 64 * 36
        let data = [UInt8](result.standardOutput)
        let count = min(times.count, data.count / frameBytes)
        return (0..<count).map { index in
            let frame = data[(index * frameBytes)..<((index + 1) * frameBytes)]
            return (times[index], Double(frame.reduce(0) { $0 + Int($1) }) / Double(frameBytes))
        }
    }

    /// The times of the test content's flashes: the first frame of each run of near-white frames
    /// (mean luma above 200 of 255).
    public static func flashTimes(file: String) async throws -> [Double] {
        var result: [Double] = []
        var previousWhite = false
        for frame in try await frameLuma(file: file) {
            let white = frame.luma > 200
            if white && !previousWhite { result.append(frame.time) }
            previousWhite = white
        }
        return result
    }

    /// For each flash, the nearest beep onset minus the flash time (positive: sound late), for
    /// flashes with a beep within `window` seconds.
    public static func avOffsets(flashes: [Double], beeps: [Double], window: Double = 0.3) -> [Double] {
        flashes.compactMap { flash in
            guard let nearest = beeps.min(by: { abs($0 - flash) < abs($1 - flash) }), abs(nearest - flash) <= window else { return nil }
            return nearest - flash
        }
    }
}
