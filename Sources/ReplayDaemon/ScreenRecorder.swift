public import ReplayIPC
public import Logging

/// Counters of a running recording, read by replayd for `replay status` and the status line.
public struct RecordingStatistics: Sendable, Equatable {
    public var elapsedSeconds: Double = 0
    public var framesWritten: Int = 0
    public var framesDropped: Int = 0
    public var bytesWritten: Int64 = 0
    public var microphoneOn: Bool = false
    public init() {}
}

/// One system screen recording: X11 capture + PulseAudio → H.264/AAC → fragmented MP4.
///
/// Life cycle: `prepare` validates and opens everything (display, region, output file, encoder,
/// audio) and throws a `ReplayError` a person can act on; `run()` records until `stop()` or the
/// duration and finalises the file; it throws a `ReplayError` (disk full, …) after keeping what was
/// written. The indicator window is left out of the frames once passed to `exclude(window:)`.
///
/// (Interface fixed first so that the daemon and the media pipeline can be built side by side.)
public final class ScreenRecorder: Sendable {
    public let options: RecordingOptions
    public let width: Int
    public let height: Int
    public let encoderName: String
    public let warnings: [String]
    public let microphoneRecorded: Bool
    public let systemAudioRecorded: Bool

    public static func prepare(options: RecordingOptions, logger: Logger) async throws(ReplayError) -> ScreenRecorder {
        throw ReplayError(.internal, "screen recording is not built yet")
    }

    private init(options: RecordingOptions) {
        self.options = options
        self.width = 0
        self.height = 0
        self.encoderName = ""
        self.warnings = []
        self.microphoneRecorded = false
        self.systemAudioRecorded = false
    }

    /// Leave this X window (and only it) out of every captured frame; what lies beneath is recomposed.
    public func exclude(window: UInt32) {}

    /// Records until `stop()` or the duration, then finalises the file.
    public func run() async throws(ReplayError) {}

    /// Asks `run()` to finish the file and return. Safe from any thread, idempotent.
    public func stop() {}

    /// Mute or unmute the microphone; the track keeps its timing (silence while muted).
    public func setMicrophone(on: Bool) {}

    public func statistics() -> RecordingStatistics { RecordingStatistics() }
}
