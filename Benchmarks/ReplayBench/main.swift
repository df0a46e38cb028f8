// replay-bench: runs OpenReplayKit's recording pipeline in-process (no daemon, no socket) and
// prints the CPU it used, so that Benchmarks/run.sh can set it beside ffmpeg on the same screen.
import ArgumentParser
import Foundation
import Logging
import ReplayDaemon
import ReplayIPC

@main
struct ReplayBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-bench",
        abstract: "Record with the OpenReplayKit pipeline in-process and report CPU use (for make bench).")

    @Option(name: .shortAndLong, help: "Output movie (must not exist).") var output: String
    @Option(help: "X display.") var display: String = ProcessInfo.processInfo.environment["DISPLAY"] ?? ":0"
    @Option(help: "Seconds to record.") var duration: Double = 10
    @Option(help: "Frames per second.") var fps: Int = 30
    @Option(help: "low | medium | high") var quality: String = "medium"
    @Option(help: "WxH+X+Y") var region: String?
    @Flag(help: "Record the default sink's monitor.") var systemAudio = false
    @Flag(help: "Record the microphone.") var mic = false
    @Flag(help: "Log at debug level.") var verbose = false

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        var logger = Logger(label: "replay-bench")
        logger.logLevel = verbose ? .debug : .warning
        let options = RecordingOptions(outputPath: URL(fileURLWithPath: output).path, durationSeconds: duration,
                                       microphone: mic, systemAudio: systemAudio, audioRequired: mic || systemAudio,
                                       display: display, region: region.flatMap(Region.init(geometry:)),
                                       framesPerSecond: fps, quality: Quality(rawValue: quality) ?? .medium)
        let before = Self.cpuSeconds()
        let recorder = try await ScreenRecorder.prepare(options: options, logger: logger)
        try await recorder.run()
        let cpu = Self.cpuSeconds() - before
        let statistics = recorder.statistics()
        print(String(format: "cpu_seconds=%.3f video_seconds=%.3f frames=%d dropped=%d bytes=%lld",
                     cpu, statistics.elapsedSeconds, statistics.framesWritten, statistics.framesDropped, statistics.bytesWritten))
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
