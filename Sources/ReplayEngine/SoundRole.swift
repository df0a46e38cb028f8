import ReplayCapture

/// What one sound source is to the recording, which decides its gain block by block.
enum SoundRole: Sendable {
    /// The default input: silent while the microphone is off.
    case microphone(PulseAudioSource)
    /// The default sink's monitor: the system sound, except while a protected sink-input plays. It
    /// is read on the unprotected mix's connection, and held there while a sink-input that may be
    /// protected has not been looked at (`SystemSoundSource`).
    case systemMonitor(SystemSoundSource)
    /// Every unprotected sink-input, each monitored alone: the system sound while a protected one plays.
    case unprotectedMix(SinkInputAudioSource)
    /// Heard as it is (an application's own sound).
    case plain(any AudioCaptureSource)

    var source: any AudioCaptureSource {
        switch self {
        case .microphone(let source): source
        case .systemMonitor(let source): source
        case .unprotectedMix(let source): source
        case .plain(let source): source
        }
    }
}
