public import ReplayIPC
public import Logging
import ReplayMedia
import ReplayCapture
import Synchronization
import Foundation

/// Counters of a running recording, read by replayd for `replay status` and the status line.
public struct RecordingStatistics: Sendable, Equatable {
    public var elapsedSeconds: Double = 0
    public var framesWritten: Int = 0
    public var framesDropped: Int = 0
    public var bytesWritten: Int64 = 0
    public var microphoneOn: Bool = false
    /// False while the recording waits for its sound sources before time zero.
    public var capturing: Bool = false
    public init() {}
}

/// One system screen recording: X11 capture + PulseAudio → H.264/AAC → fragmented MP4.
///
/// Life cycle: `prepare` validates and opens everything (display, region, encoder, audio, output
/// file) and throws a `ReplayError` a person can act on; `run()` records until `stop()` or the
/// duration and finalises the file; it throws a `ReplayError` (disk full, …) after keeping what was
/// written. The indicator window is left out of the frames once passed to `exclude(window:)`.
///
/// Threads: blocking C work never runs on the cooperative pool. Three dedicated threads do it:
/// capture (X11 reads and colour conversion, paced by the frame clock), video encoding (one loop,
/// fed through a bounded queue: when it falls behind, whole frames are dropped and counted) and
/// audio (mixes the PulseAudio sources on the media clock and encodes AAC; never drops silently).
public final class ScreenRecorder: Sendable {
    public let options: RecordingOptions
    public let width: Int
    public let height: Int
    public let encoderName: String
    public let warnings: [String]
    public let microphoneRecorded: Bool
    public let systemAudioRecorded: Bool
    private let pipeline: RecordingPipeline

    /// Opens the display, the encoders, the audio sources and the file. Runs on a dedicated thread.
    public static func prepare(options: RecordingOptions, logger: Logger) async throws(ReplayError) -> ScreenRecorder {
        let result: Result<ScreenRecorder, ReplayError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                do throws(ReplayError) {
                    continuation.resume(returning: .success(try make(options: options, logger: logger)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            thread.name = "replayd-prepare"
            thread.start()
        }
        return try result.get()
    }

    private static func make(options: RecordingOptions, logger: Logger) throws(ReplayError) -> ScreenRecorder {
        FFmpegLog.route(to: logger)
        var warnings: [String] = []
        // 1. The screen.
        let region = options.region.map { PixelRect(x: $0.x, y: $0.y, width: $0.width, height: $0.height) }
        let capture: ScreenCapture
        do {
            capture = try ScreenCapture(display: options.display, region: region, logger: logger)
        } catch {
            switch error.kind {
            case .unknownDisplay: throw ReplayError(.unknownDisplay, error.message)
            case .regionOutsideScreen: throw ReplayError(.regionOutsideScreen, error.message)
            case .unsupported, .lost: throw ReplayError(.captureFailed, error.message)
            }
        }
        // 2. The video encoder.
        var settings = VideoEncoderSettings(width: capture.outputWidth, height: capture.outputHeight,
                                            framesPerSecond: options.framesPerSecond, preset: "veryfast", crf: 23)
        switch options.quality {
        case .low: (settings.preset, settings.crf) = ("ultrafast", 26)
        case .medium: (settings.preset, settings.crf) = ("veryfast", 23)
        case .high: (settings.preset, settings.crf) = ("faster", 20)
        }
        let encoder: VideoEncoder
        do {
            encoder = try openVideoEncoder(settings: settings, choice: options.encoder, warnings: &warnings, logger: logger)
        } catch {
            throw ReplayError(.encoderUnavailable, error.message)
        }
        // 3. Sound.
        var sources: [PulseAudioSource] = []
        var systemAudio = false, microphone = false
        do throws(AudioError) {
            if options.systemAudio {
                sources.append(try PulseAudioSource(device: .systemAudio, logger: logger))
                systemAudio = true
            }
            if options.microphone {
                sources.append(try PulseAudioSource(device: .microphone, logger: logger))
                microphone = true
                if let monitor = PulseIntrospection.defaultSourceIfMonitor() {
                    let warning = "the default sound input is \"\(monitor)\", what the computer plays, not a microphone "
                        + "(is one plugged in and chosen in the sound settings?): --mic records that sound"
                        + (options.systemAudio ? " a second time" : "")
                    logger.warning("\(warning)")
                    warnings.append(warning)
                }
            }
        } catch {
            if options.audioRequired {
                throw ReplayError(.noAudioServer,
                                  "cannot record sound: PulseAudio says \"\(error.message)\". Start PulseAudio (or PipeWire's PulseAudio server), or record without --mic")
            }
            sources.removeAll()
            systemAudio = false
            microphone = false
            let warning = "no sound server (PulseAudio says \"\(error.message)\"): recording video only"
            logger.warning("\(warning)")
            warnings.append(warning)
        }
        // 4. The file, last: nothing is left on disk when anything above fails.
        let writer: MovieWriter
        do {
            writer = try MovieWriter(path: options.outputPath, logger: logger)
        } catch {
            throw ReplayError(error.kind == .outputExists ? .outputExists : .outputNotWritable, error.message)
        }
        let pipeline: RecordingPipeline
        do {
            pipeline = try RecordingPipeline(options: options, capture: capture, encoder: encoder, sources: sources,
                                             microphoneIndex: microphone ? sources.count - 1 : nil, writer: writer, logger: logger)
        } catch {
            unlink(options.outputPath)
            throw ReplayError.from(error)
        }
        return ScreenRecorder(options: options, pipeline: pipeline, width: capture.outputWidth, height: capture.outputHeight,
                              encoderName: encoder.name, warnings: warnings, microphone: microphone, systemAudio: systemAudio)
    }

    private static func openVideoEncoder(settings: VideoEncoderSettings, choice: EncoderChoice, warnings: inout [String],
                                         logger: Logger) throws(MediaError) -> VideoEncoder {
        switch choice {
        case .x264:
            return try VideoEncoder(settings: settings, logger: logger)
        case .vaapi:
            guard let node = VideoEncoder.vaapiRenderNode(logger: logger) else {
                throw MediaError(.encoderUnavailable, "--encoder vaapi: no working VA-API render node (/dev/dri/renderD*) on this machine; use --encoder x264 or auto")
            }
            var hardware = settings
            hardware.backend = .vaapi
            return try VideoEncoder(settings: hardware, renderNode: node, logger: logger)
        case .auto:
            if let node = VideoEncoder.vaapiRenderNode(logger: logger) {
                var hardware = settings
                hardware.backend = .vaapi
                do {
                    return try VideoEncoder(settings: hardware, renderNode: node, logger: logger)
                } catch {
                    logger.warning("VA-API on \(node) failed (\(error.message)); falling back to libx264")
                }
            } else {
                logger.info("no working VA-API render node: encoding with libx264")
            }
            return try VideoEncoder(settings: settings, logger: logger)
        }
    }

    private init(options: RecordingOptions, pipeline: RecordingPipeline, width: Int, height: Int, encoderName: String,
                 warnings: [String], microphone: Bool, systemAudio: Bool) {
        self.options = options
        self.pipeline = pipeline
        self.width = width
        self.height = height
        self.encoderName = encoderName
        self.warnings = warnings
        self.microphoneRecorded = microphone
        self.systemAudioRecorded = systemAudio
    }

    /// Leave this X window (and only it) out of every captured frame; what lies beneath is recomposed.
    public func exclude(window: UInt32) {
        pipeline.capture.exclude(window: window)
    }

    /// Records until `stop()` or the duration, then finalises the file.
    public func run() async throws(ReplayError) {
        if let error = await pipeline.run() { throw error }
    }

    /// Asks `run()` to finish the file and return. Safe from any thread, idempotent.
    public func stop() {
        pipeline.requestStop()
    }

    /// Mute or unmute the microphone; the track keeps its timing (silence while muted).
    public func setMicrophone(on: Bool) {
        pipeline.setMicrophone(on: on)
    }

    public func statistics() -> RecordingStatistics {
        pipeline.statistics()
    }
}

extension ReplayError {
    static func from(_ error: MediaError) -> ReplayError {
        switch error.kind {
        case .diskFull: ReplayError(.diskFull, error.message)
        case .writeFailed: ReplayError(.writeFailed, error.message)
        case .encoderUnavailable, .encoderFailed: ReplayError(.encoderUnavailable, error.message)
        case .outputExists: ReplayError(.outputExists, error.message)
        case .outputNotWritable: ReplayError(.outputNotWritable, error.message)
        }
    }
}
