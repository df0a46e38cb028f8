import ReplayIPC
import ReplayEngine
import ReplayMedia

/// How a client's request becomes the engine's configuration, and the engine's errors become what
/// `replay` shows: the engine's words, plus the flag that gets around it.
extension EngineConfiguration {
    init(_ options: RecordingOptions) {
        let video: VideoSource = options.region.map {
            .region(display: options.display, x: $0.x, y: $0.y, width: $0.width, height: $0.height)
        } ?? .screen(display: options.display)
        var audio: [AudioSource] = []
        if options.systemAudio { audio.append(.systemMix) }
        if options.microphone { audio.append(.microphone) }
        let quality: EncodingQuality = switch options.quality {
        case .low: .low
        case .medium: .medium
        case .high: .high
        }
        let encoder: EncoderPreference = switch options.encoder {
        case .auto: .automatic
        case .x264: .x264
        case .vaapi: .vaapi
        }
        self.init(video: video, audio: audio, audioRequired: options.audioRequired,
                  audioLayout: options.separateAudioTracks ? .separateTracks : .mixed,
                  framesPerSecond: options.framesPerSecond, durationSeconds: options.durationSeconds,
                  quality: quality, encoder: encoder)
    }
}

extension ReplayError {
    init(_ error: EngineError) {
        let message = error.message
        switch error.kind {
        case .unknownDisplay: self.init(.unknownDisplay, "\(message) (check --display or DISPLAY)")
        case .regionOutsideScreen: self.init(.regionOutsideScreen, "\(message); give a --region within it")
        case .captureFailed: self.init(.captureFailed, message)
        case .encoderUnavailable: self.init(.encoderUnavailable, "\(message); choose another --encoder")
        case .hardwareEncoderUnavailable: self.init(.encoderUnavailable, "--encoder vaapi: \(message); use --encoder x264 or auto")
        case .noAudioServer: self.init(.noAudioServer, "\(message). Start PulseAudio (or PipeWire's PulseAudio server), or record without --mic")
        case .outputExists: self.init(.outputExists, "\(message): choose another name with -o, or remove it")
        case .outputNotWritable: self.init(.outputNotWritable, "\(message); choose a folder you can write to with -o")
        case .diskFull: self.init(.diskFull, "\(message); free some space or record to another disk with -o")
        case .writeFailed: self.init(.writeFailed, message)
        case .misuse: self.init(.internal, message)
        case .declined: self.init(.permissionDenied, "\(message): nothing was recorded. Run the command again and choose the screen to share")
        case .unavailableOnThisDesktop: self.init(.unavailableOnThisDesktop, "\(message) (`replay doctor` says what this desktop offers)")
        }
    }

    init(_ error: MediaError) {
        self.init(EngineError(error))
    }
}
