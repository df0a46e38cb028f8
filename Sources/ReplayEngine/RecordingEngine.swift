public import Logging
package import ReplayMedia
import ReplayCapture
import ReplayFFmpeg
import ReplayIPC
import Synchronization
import Foundation
import ReplaySystem

/// Counters of a running capture, read for `replay status` and the status line.
public struct EngineStatistics: Sendable, Equatable {
    public var elapsedSeconds: Double = 0
    public var framesWritten: Int = 0
    public var framesDropped: Int = 0
    public var bytesWritten: Int64 = 0
    public var microphoneOn: Bool = false
    /// False while the engine waits for its sound sources before time zero.
    public var capturing: Bool = false
    public init() {}
}

/// The recording engine: capture → convert → encode, independent of the daemon. One capture of a
/// `VideoSource` and its `AudioSource`s, encoded once, feeding every attached `MediaDestination`
/// (the fragmented MP4 file today; a stream and a clip ring next).
///
/// Life cycle: `prepare` opens the display, the encoders and the sound sources and throws an
/// `EngineError` naming what is wrong; `attach` adds destinations (before `run`); `run()` captures
/// until `stop()` or the duration and finishes every destination; it throws an `EngineError` (disk
/// full, …) after finishing what it can. Windows passed to `exclude(window:)` are left out of the frames.
///
/// Threads: blocking C work never runs on the cooperative pool. Three dedicated threads do it:
/// capture (X11 reads and colour conversion, paced by the frame clock), video encoding (one loop,
/// fed through a bounded queue: when it falls behind, whole frames are dropped and counted) and
/// audio (mixes the PulseAudio sources on the media clock and encodes AAC; never drops silently).
/// With taps and no destination (in-app capture) nothing is encoded: there is no video thread, the
/// audio thread only cuts the sound for the taps, and `framesWritten` counts the pictures tapped.
public final class RecordingEngine: Sendable {
    public let configuration: EngineConfiguration
    public let width: Int
    public let height: Int
    /// The video encoder's name; empty for a capture that feeds taps only (it encodes nothing).
    public let encoderName: String
    /// What a person should know (no sound server: pictures only; a monitor taken as the microphone).
    public let warnings: [String]
    public let microphoneRecorded: Bool
    public let systemAudioRecorded: Bool
    private let pipeline: CapturePipeline

    /// Opens the display, the encoders and the sound sources, on a dedicated thread.
    public static func prepare(configuration: EngineConfiguration, logger: Logger) async throws(EngineError) -> RecordingEngine {
        try await DedicatedThread.run(named: "replay-prepare") { () throws(EngineError) -> RecordingEngine in
            try make(configuration: configuration, logger: logger)
        }
    }

    private static func make(configuration: EngineConfiguration, logger: Logger) throws(EngineError) -> RecordingEngine {
        FFmpegLog.route(to: logger)
        var warnings: [String] = []
        // 1. The screen, or one application's windows.
        let capture: any FrameSource
        let follows = configuration.screenSizeChanges == .followed
        let desktop = DesktopSession(displayName: configuration.video.display)
        if case .application = configuration.video, desktop?.isWayland == true {
            // Only GNOME (with OpenReplayKit's Shell extension) gives one app's windows to replayd:
            // elsewhere refused, never a crop of the screen.
            guard WaylandSupport.appSessionsPossible() else {
                throw EngineError(.unavailableOnThisDesktop, WaylandSupport.appSessionsUnavailable())
            }
            if let problem = GnomeWindowCapture.extensionProblem() {
                throw EngineError(.unavailableOnThisDesktop, WaylandSupport.appSessionsUnavailable(gnomeExtensionProblem: problem))
            }
        }
        do throws(CaptureError) {
            if case .application(_, let scope) = configuration.video, desktop?.isWayland == true {
                capture = try GnomeWindowCapture(processID: scope.processID, framesPerSecond: configuration.framesPerSecond, logger: logger)
            } else if case .application(let display, let scope) = configuration.video {
                capture = try ApplicationCapture(display: display, processID: scope.processID, followsScreenSize: follows, logger: logger)
            } else if desktop?.isWayland == true {
                capture = try PortalScreenCapture(region: configuration.video.rectangle, framesPerSecond: configuration.framesPerSecond, tokenFile: StatePaths.portalRestoreToken(), logger: logger)
            } else {
                capture = try ScreenCapture(display: configuration.video.display, region: configuration.video.rectangle,
                                            followsScreenSize: follows, logger: logger)
            }
        } catch {
            switch error.kind {
            case .unknownDisplay: throw EngineError(.unknownDisplay, error.message)
            case .regionOutsideScreen: throw EngineError(.regionOutsideScreen, error.message)
            case .unsupported, .lost: throw EngineError(.captureFailed, error.message)
            case .declined: throw EngineError(.declined, error.message)
            }
        }
        // 2. The video encoder, unless the pictures follow the screen's size: such a capture feeds
        // taps only (a broadcast's frame ring, an app's own samples), whose reader encodes them. A
        // 1080p libx264 opened for nothing cost a broadcast's start ~40 ms and replayd its memory.
        let (preset, crf) = configuration.quality.x264
        var settings = VideoEncoderSettings(width: capture.outputWidth, height: capture.outputHeight,
                                            framesPerSecond: configuration.framesPerSecond, preset: preset, crf: crf)
        if !configuration.x264TakesChangedBlocks { settings.backend = .libavcodecX264 }
        let encoder = follows ? nil : try openVideoEncoder(settings: settings, preference: configuration.encoder, logger: logger)
        // 3. Sound.
        var sources: [(AudioSource, [SoundRole])] = []
        do throws(AudioError) {
            for source in configuration.audio {
                switch source {
                case .systemMix:
                    // The sink's monitor, and beside it the unprotected sink-inputs one by one, which
                    // stand in for it while a protected sink-input plays: one connection for both,
                    // whose order tells the monitor's sound from the announcements of sink-inputs.
                    let unprotected = try SinkInputAudioSource(selection: .unprotected, logger: logger)
                    sources.append((source, [.systemMonitor(unprotected.systemSound()), .unprotectedMix(unprotected)]))
                case .microphone:
                    sources.append((source, [.microphone(try PulseAudioSource(logger: logger))]))
                case .application(let scope):
                    sources.append((source, [.plain(try SinkInputAudioSource(selection: .application(processID: scope.processID),
                                                                             logger: logger))]))
                }
            }
            if configuration.audio.contains(.microphone), let monitor = PulseIntrospection.defaultSourceIfMonitor() {
                let warning = "the default sound input is \"\(monitor)\", what the computer plays, not a microphone "
                    + "(is one plugged in and chosen in the sound settings?): the microphone track records that sound"
                    + (configuration.audio.contains(.systemMix) ? " a second time" : "")
                logger.warning("\(warning)")
                warnings.append(warning)
            }
        } catch {
            if configuration.audioRequired {
                throw EngineError(.noAudioServer, "cannot record sound: PulseAudio says \"\(error.message)\"")
            }
            sources.removeAll()
            let warning = "no sound server (PulseAudio says \"\(error.message)\"): recording video only"
            logger.warning("\(warning)")
            warnings.append(warning)
        }
        let pipeline: CapturePipeline
        do throws(MediaError) {
            pipeline = try CapturePipeline(configuration: configuration, capture: capture, encoder: encoder,
                                           sources: sources, logger: logger)
        } catch {
            throw EngineError(error)
        }
        return RecordingEngine(configuration: configuration, pipeline: pipeline, width: capture.outputWidth,
                               height: capture.outputHeight, encoderName: encoder?.name ?? "", warnings: warnings,
                               microphone: sources.contains { $0.0 == .microphone },
                               systemAudio: sources.contains { $0.0 == .systemMix })
    }

    private static func openVideoEncoder(settings: VideoEncoderSettings, preference: EncoderPreference,
                                          logger: Logger) throws(EngineError) -> VideoEncoder {
        // libx264 asks for transparent huge pages for its buffers (about 180 MB at 1080p). Where the
        // kernel grants them, it zeroes 2 MB at the first touch of each and compacts memory to find
        // them: 0.3-0.47 CPU-s of kernel time in a 10 s replay-bench of the desktop, against 0.18-0.24
        // with ordinary pages, for the same time in libx264 (docs/lab-notes/2026-11-27-x264-ordinary-pages.md). Off for the process
        // (replayd, replay-bench) before the first encoder allocates; the extensions do the same.
        if let errno = TransparentHugePages.disable() {
            logger.debug("transparent huge pages stay on: prctl refused (errno \(errno))")
        }
        let node = preference == .x264 ? nil : VideoEncoder.vaapiRenderNode(logger: logger)
        if preference == .vaapi, node == nil {
            throw EngineError(.hardwareEncoderUnavailable, "no working VA-API render node (/dev/dri/renderD*) on this machine")
        }
        do throws(MediaError) {
            if let node {
                var hardware = settings
                hardware.backend = .vaapi
                do {
                    return try VideoEncoder(settings: hardware, renderNode: node, logger: logger)
                } catch where preference == .automatic {
                    logger.warning("VA-API on \(node) failed (\(error.message)); falling back to libx264")
                }
            } else if preference == .automatic {
                logger.info("no working VA-API render node: encoding with libx264")
            }
            return try VideoEncoder(settings: settings, logger: logger)
        } catch {
            throw EngineError(error)
        }
    }

    private init(configuration: EngineConfiguration, pipeline: CapturePipeline, width: Int, height: Int, encoderName: String,
                 warnings: [String], microphone: Bool, systemAudio: Bool) {
        self.configuration = configuration
        self.pipeline = pipeline
        self.width = width
        self.height = height
        self.encoderName = encoderName
        self.warnings = warnings
        self.microphoneRecorded = microphone
        self.systemAudioRecorded = systemAudio
    }

    /// Adds a destination: every track of this capture gets a track there. Before `run()`.
    package func attach(_ destination: any MediaDestination) throws(EngineError) {
        try pipeline.attach(destination)
    }

    /// Adds a tap that sees every picture before the encoder (in-app capture, extensions). Before `run()`.
    package func attach(tap: any FrameTap) throws(EngineError) {
        try pipeline.attach(tap: tap)
    }

    /// Adds a tap that hears every sound source (in-app capture, extensions). Before `run()`.
    package func attach(audioTap: any AudioTap) throws(EngineError) {
        try pipeline.attach(audioTap: audioTap)
    }

    /// Leave this X window (and only it) out of every captured frame; what lies beneath is recomposed.
    public func exclude(window: UInt32) {
        pipeline.capture.exclude(window: window)
    }

    /// Captures until `stop()` or the duration, then finishes every destination.
    public func run() async throws(EngineError) {
        if let error = await pipeline.run() { throw error }
    }

    /// Asks `run()` to finish and return. Safe from any thread, idempotent.
    public func stop() {
        pipeline.requestStop()
    }

    /// True when the person ended the capture from the desktop itself (Wayland's screen-sharing stop button).
    public var endedByPerson: Bool { pipeline.capture.endedByPerson }

    /// Mute or unmute the microphone; the track keeps its timing (silence while muted).
    public func setMicrophone(on: Bool) {
        pipeline.setMicrophone(on: on)
    }

    public func statistics() -> EngineStatistics {
        pipeline.statistics()
    }
}

extension EngineError {
    package init(_ error: MediaError) {
        switch error.kind {
        case .diskFull: self.init(.diskFull, error.message)
        case .writeFailed: self.init(.writeFailed, error.message)
        case .encoderUnavailable, .encoderFailed: self.init(.encoderUnavailable, error.message)
        case .outputExists: self.init(.outputExists, error.message)
        case .outputNotWritable: self.init(.outputNotWritable, error.message)
        }
    }
}
