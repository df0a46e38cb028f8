/// A failure of the media pipeline: its kind, and what happened in plain words. Messages name no
/// command-line flag: the program that shows them adds how to get around it.
public struct MediaError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case diskFull, writeFailed, encoderUnavailable, encoderFailed, outputExists, outputNotWritable
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
