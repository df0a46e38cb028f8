import ReplayCapture

/// What one sound source is to the recording, which decides its gain block by block.
enum SoundRole: Sendable {
    /// The default input: silent while the microphone is off.
    case microphone(PulseAudioSource)
    /// The default sink's monitor: the system sound, except while a protected sink-input plays.
    case systemMonitor(PulseAudioSource)
    /// Every unprotected sink-input, each monitored alone: the system sound while a protected one plays.
    case unprotectedMix(SinkInputAudioSource)
    /// Heard as it is (an application's own sound).
    case plain(any AudioCaptureSource)

    var source: any AudioCaptureSource {
        switch self {
        case .microphone(let source), .systemMonitor(let source): source
        case .unprotectedMix(let source): source
        case .plain(let source): source
        }
    }
}
