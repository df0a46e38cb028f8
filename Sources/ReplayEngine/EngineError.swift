/// Why the engine could not start, or why it stopped: a kind a program can act on, and what
/// happened in plain words. The messages name no command-line flag: the program that shows them
/// adds how to get around it (replayd names `replay`'s flags).
public struct EngineError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// The X display does not answer, or has no such screen.
        case unknownDisplay
        /// The region does not lie on the screen.
        case regionOutsideScreen
        /// Capture failed (an unsupported display, a lost connection).
        case captureFailed
        /// The H.264 or AAC encoder cannot be opened.
        case encoderUnavailable
        /// The hardware encoder was asked for, and there is no working render node.
        case hardwareEncoderUnavailable
        /// Sound was required and the sound server cannot be reached.
        case noAudioServer
        case outputExists
        case outputNotWritable
        case diskFull
        case writeFailed
        /// Used wrongly (run twice, a destination attached after the start).
        case misuse
        /// The person declined to share the screen in the desktop's own dialog.
        case declined
        /// This desktop cannot give what was asked without breaking the privacy model (one app's
        /// windows on a compositor that has no way to capture them alone).
        case unavailableOnThisDesktop
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
