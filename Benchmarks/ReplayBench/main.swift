// replay-bench: runs OpenReplayKit's recording pipeline in-process (no daemon, no socket) and
// prints the CPU it used, so that Benchmarks/run.sh can set it beside ffmpeg on the same screen.
import ArgumentParser
import CX264
import Foundation
import Logging
import ReplayEngine
import ReplayMedia

@main
struct ReplayBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-bench",
        abstract: "The OpenReplayKit pipeline in-process, for make bench.",
        subcommands: [Record.self, Convert.self, Reencode.self],
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

/// Encodes again the pictures replayd handed libx264, as a build with
/// `Benchmarks/x264lab/dump-pictures.patch` wrote them (per picture its time, its type, whether a
/// map was given, the I420 picture and the map of unchanged macroblocks), with the recorder's busy
/// set-up and then libx264's own options. With no options, from a recording that stayed busy, it
/// gives replayd's own stream, to the byte but for the version SEI.
struct Reencode: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Encode again the pictures replayd handed libx264, with libx264's own options (Benchmarks/x264lab).")
    @Argument(help: "The pictures, as ORK_DUMP wrote them.") var pictures: String
    @Option(name: .shortAndLong, help: "The H.264 stream (Annex B) to write.") var output: String
    @Option(help: "libx264's options after the recorder's, key=value:… (e.g. subme=0:no-deblock=1).") var options = ""
    @Option(help: "libx264's threads (0: its own choice).") var threads: Int32 = 3
    @Option(help: "Also write the pictures as they were handed in, raw I420, to this file.") var reference: String?
    @Option var width = 1920
    @Option var height = 1080

    func run() throws {
        var param = x264_param_t()
        x264_param_default_preset(&param, "veryfast", nil)
        param.i_log_level = X264_LOG_NONE
        param.i_csp = X264_CSP_I420
        param.i_width = Int32(width)
        param.i_height = Int32(height)
        param.i_fps_num = 30; param.i_fps_den = 1; param.i_timebase_num = 1; param.i_timebase_den = 30
        param.rc.i_rc_method = X264_RC_CRF
        param.rc.f_rf_constant = 23
        param.i_keyint_max = 61
        param.i_bframe = 1
        param.b_repeat_headers = 1
        param.b_annexb = 1
        param.analyse.b_mb_info = 1
        if threads > 0 { param.i_threads = threads }
        // VideoEncoder's parameters for a recording, then the options asked for.
        let all = VideoEncoder.recordingX264Parameters + (options.isEmpty ? "" : ":" + options)
        for option in all.split(separator: ":") {
            let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, x264_param_parse(&param, pair[0], pair[1]) == 0 else {
                throw ValidationError("libx264 refuses the option \(option)")
            }
        }
        guard x264_param_apply_profile(&param, "high") == 0, let encoder = ork_x264_encoder_open(&param) else {
            throw ValidationError("libx264 does not open with \(all)")
        }
        defer { x264_encoder_close(encoder) }
        guard let input = fopen(pictures, "rb"), let stream = fopen(output, "wb") else {
            throw ValidationError("cannot open \(pictures) or \(output)")
        }
        defer { fclose(input); fclose(stream) }
        let raw = reference.flatMap { fopen($0, "wb") }
        defer { if let raw { fclose(raw) } }

        let size = width * height * 3 / 2
        let blocks = ((width + 15) / 16) * ((height + 15) / 16)
        let frame = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        defer { frame.deallocate() }
        var picture = x264_picture_t()
        x264_picture_init(&picture)
        picture.img.i_csp = X264_CSP_I420
        picture.img.i_plane = 3
        picture.img.plane = (frame, frame + width * height, frame + width * height * 5 / 4, nil)
        picture.img.i_stride = (Int32(width), Int32(width / 2), Int32(width / 2), 0)
        var given = x264_picture_t()
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        var (pictureCount, bytes, keyframes, keyframeBytes, changed) = (0, 0, 0, 0, 0)
        var spent = 0.0
        var head = [Int64](repeating: 0, count: 3)
        while true {
            let start = Self.cpuSeconds()
            let written: Int32
            if fread(&head, 8, 3, input) == 3 {
                guard let map = malloc(blocks)?.assumingMemoryBound(to: UInt8.self) else { break }
                guard fread(frame, 1, size, input) == size, fread(map, 1, blocks, input) == blocks else { free(map); break }
                if let raw { fwrite(frame, 1, size, raw) }
                if head[1] != Int64(X264_TYPE_KEYFRAME) {
                    changed += head[2] != 0 ? (0..<blocks).filter { map[$0] & UInt8(X264_MBINFO_CONSTANT) == 0 }.count : blocks
                }
                picture.i_pts = head[0]
                picture.i_type = Int32(head[1])
                if head[2] != 0 {
                    picture.prop.mb_info = map
                    picture.prop.mb_info_free = { free($0) }
                } else {
                    free(map)
                    picture.prop.mb_info = nil
                }
                written = x264_encoder_encode(encoder, &nals, &count, &picture, &given)
                pictureCount += 1
            } else if x264_encoder_delayed_frames(encoder) > 0 {
                written = x264_encoder_encode(encoder, &nals, &count, nil, &given)
            } else {
                break
            }
            spent += Self.cpuSeconds() - start
            guard written >= 0 else { throw ValidationError("libx264 failed to encode") }
            if written > 0, let nals {
                fwrite(nals.pointee.p_payload, 1, Int(written), stream)
                bytes += Int(written)
                if given.b_keyframe != 0 { keyframes += 1; keyframeBytes += Int(written) }
            }
        }
        let cost = changed > 0 ? Double(bytes - keyframeBytes) / Double(changed) : 0
        print("pictures \(pictureCount) bytes \(bytes) keyframes \(keyframes) (\(keyframeBytes) bytes) "
              + "P bytes per changed macroblock \((cost * 100).rounded() / 100) cpu \((spent * 1000).rounded() / 1000) s")
    }

    private static func cpuSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
