/// An error a person sees: what happened and what to do. It crosses the control socket, so the
/// CLI prints exactly what replayd decided.
public struct ReplayError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    public struct Code: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let noDisplay = Code(rawValue: "no-display")
        public static let unknownDisplay = Code(rawValue: "unknown-display")
        public static let regionOutsideScreen = Code(rawValue: "region-outside-screen")
        public static let outputExists = Code(rawValue: "output-exists")
        public static let outputNotWritable = Code(rawValue: "output-not-writable")
        public static let unknownEncoder = Code(rawValue: "unknown-encoder")
        public static let encoderUnavailable = Code(rawValue: "encoder-unavailable")
        public static let noAudioServer = Code(rawValue: "no-audio-server")
        public static let sessionActive = Code(rawValue: "session-active")
        public static let noSession = Code(rawValue: "no-session")
        public static let diskFull = Code(rawValue: "disk-full")
        public static let writeFailed = Code(rawValue: "write-failed")
        public static let captureFailed = Code(rawValue: "capture-failed")
        /// The desktop cannot give what was asked within the privacy model (an app's own windows on sway).
        public static let unavailableOnThisDesktop = Code(rawValue: "unavailable-on-this-desktop")
        public static let badRequest = Code(rawValue: "bad-request")
        public static let protocolMismatch = Code(rawValue: "protocol-mismatch")
        public static let permissionDenied = Code(rawValue: "permission-denied")
        public static let daemonUnavailable = Code(rawValue: "daemon-unavailable")
        /// replayd is leaving (idle, or asked to): nothing was done; a client may start a new one.
        public static let shuttingDown = Code(rawValue: "shutting-down")
        public static let `internal` = Code(rawValue: "internal")
    }

    public var code: Code
    /// One or two sentences: what happened, then what to do.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
