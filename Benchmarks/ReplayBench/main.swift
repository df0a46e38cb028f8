// replay-bench: runs OpenReplayKit's recording pipeline in-process (no daemon, no socket) and
// prints the CPU it used, so that Benchmarks/run.sh can set it beside ffmpeg on the same screen.
import ArgumentParser
import Foundation
import Logging
import ReplayEngine
import ReplayMedia

@main
struct ReplayBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-bench",
        abstract: "The OpenReplayKit pipeline in-process, for make bench.",
        subcommands: [Record.self, Convert.self],
        defaultSubcommand: Record.self)
}

/// Times BGRX → I420 with libyuv and libswscale on the same pictures.
struct Convert: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Time colour conversion: libyuv against libswscale.")
    @Option var width = 1920
    @Option var height = 1080
    @Option var frames = 200

    func run() {
        let stride = width * 4
        var pixels = [UInt8](repeating: 0, count: stride * height)
        for i in pixels.indices { pixels[i] = UInt8(truncatingIfNeeded: i &* 2654435761 >> 13) }
        let frame = VideoFrame(width: width, height: height)
        var results: [(ColorConversionLibrary, Double)] = []
        for library in ColorConversionLibrary.allCases {
            let converter = ColorConverter(library: library, width: width, height: height)
            pixels.withUnsafeBufferPointer { converter.convert($0.baseAddress!, stride: stride, into: frame) }   // warm up
            let start = MonotonicClock.now()
            for _ in 0..<frames {
                pixels.withUnsafeBufferPointer { converter.convert($0.baseAddress!, stride: stride, into: frame) }
            }
            let perFrame = Double(MonotonicClock.now() - start) / Double(frames) / 1e6
            results.append((library, perFrame))
            print(String(format: "convert %@ %dx%d: %.3f ms/frame", library.rawValue, width, height, perFrame))
        }
        print(String(format: "convert ratio libyuv/libswscale: %.3f", results[0].1 / results[1].1))
    }
}

struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record with the OpenReplayKit pipeline in-process and report CPU use.")

    @Option(name: .shortAndLong, help: "Output movie (must not exist).") var output: String
    @Option(help: "X display.") var display: String = ProcessInfo.processInfo.environment["DISPLAY"] ?? ":0"
    @Option(help: "Seconds to record.") var duration: Double = 10
    @Option(help: "Frames per second.") var fps: Int = 30
    @Option(help: "low | medium | high") var quality: String = "medium"
    @Option(help: "WxH+X+Y") var region: String?
    @Option(help: "Record only this process's (and its children's) windows and sound, as an app's own recording.") var app: Int32?
    @Flag(help: "Record the default sink's monitor.") var systemAudio = false
    @Flag(help: "Record the microphone.") var mic = false
    @Flag(help: "Log at debug level.") var verbose = false
    @Flag(help: "libx264 through libavcodec, not told which macroblocks did not change (the encoder before the damage map).")
    var libavcodecX264 = false

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        var logger = Logger(label: "replay-bench")
        logger.logLevel = verbose ? .debug : .warning
        let video: VideoSource
        if let app {
            video = .application(display: display, ApplicationScope(processID: app))
        } else if let region {
            guard let r = Self.geometry(region) else { throw ValidationError("--region is WxH+X+Y") }
            video = .region(display: display, x: r.x, y: r.y, width: r.width, height: r.height)
        } else {
            video = .screen(display: display)
        }
        let levels: [String: EncodingQuality] = ["low": .low, "medium": .medium, "high": .high]
        var configuration = EngineConfiguration(
            video: video, audio: (systemAudio ? [app.map { .application(ApplicationScope(processID: $0)) } ?? .systemMix] : []) + (mic ? [.microphone] : []),
            audioRequired: mic || systemAudio, framesPerSecond: fps, durationSeconds: duration,
            quality: levels[quality] ?? .medium)
        configuration.x264TakesChangedBlocks = !libavcodecX264
        let before = Self.cpuSeconds()
        let recorder = try await RecordingEngine.prepare(configuration: configuration, logger: logger)
        try recorder.attach(try MovieWriter(path: URL(fileURLWithPath: output).path, logger: logger))
        // Steady state: the CPU from 3 s in to the end, without the start-up (encoder set-up, the
        // first touches of its buffers) that a long recording does not notice.
        let settle = 3.0
        let steadyStart = Task { () -> (cpu: Double, at: ContinuousClock.Instant) in
            try? await Task.sleep(for: .seconds(settle))
            return (Self.cpuSeconds(), .now)
        }
        try await recorder.run()
        let cpu = Self.cpuSeconds() - before
        let steady = await steadyStart.value
        let steadySeconds = Double((ContinuousClock.now - steady.at) / .milliseconds(1)) / 1000
        let steadyRate = steadySeconds > 0.5 ? (Self.cpuSeconds() - steady.cpu) / steadySeconds : cpu / max(duration, 0.001)
        let statistics = recorder.statistics()
        print(String(format: "cpu_seconds=%.3f steady_cores=%.4f video_seconds=%.3f frames=%d dropped=%d bytes=%lld",
                     cpu, steadyRate, statistics.elapsedSeconds, statistics.framesWritten, statistics.framesDropped, statistics.bytesWritten))
    }

    /// `WxH+X+Y`.
    static func geometry(_ text: String) -> (width: Int, height: Int, x: Int, y: Int)? {
        let numbers = text.split(whereSeparator: { $0 == "x" || $0 == "+" }).compactMap { Int($0) }
        return numbers.count == 4 ? (numbers[0], numbers[1], numbers[2], numbers[3]) : nil
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
