/// What a sample buffer from in-app capture holds, with ReplayKit's raw values.
public enum RPSampleBufferType: Int, Sendable, Hashable {
    /// A picture: an NV12 `CVPixelBuffer` (`CMSampleBufferGetImageBuffer`).
    case video = 1
    /// Sound the app itself plays: Float32 interleaved, 48 kHz, stereo.
    case audioApp = 2
    /// The microphone, in the same format (silent while the microphone is off).
    case audioMic = 3
}
