/// What a running (or just finished) session reports: `replay status`, the live status line.
public struct SessionStatus: Codable, Sendable, Equatable {
    /// What kind of session: open, so that a client meets new kinds (app recordings, captures,
    /// clips, broadcasts) without a decoding error.
    public struct Kind: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The system recording: the whole screen (or a region) for the person at the desktop.
        public static let recording = Kind(rawValue: "recording")
    }
    public enum State: String, Codable, Sendable { case starting, running, stopping, finished, failed }

    public var id: String
    public var kind: Kind
    public var state: State
    /// The uid-local pid of the client that started it (shown when a second one is refused).
    public var clientPID: Int32
    public var outputPath: String
    public var display: String
    public var width: Int
    public var height: Int
    public var framesPerSecond: Int
    public var elapsedSeconds: Double
    public var framesWritten: Int
    public var framesDropped: Int
    public var bytesWritten: Int64
    public var microphoneOn: Bool
    public var microphoneRecorded: Bool
    public var systemAudioRecorded: Bool
    public var encoder: String
    public var warnings: [String]
    /// Why it failed (`state == .failed`), e.g. the disk filled up; the file holds what came before.
    public var error: ReplayError?
    /// A clip buffer's length (`replay clip start --seconds`); absent for other sessions.
    public var clipSeconds: Double?
    /// Seconds a clip buffer holds now (its memory is `bytesWritten`).
    public var bufferedSeconds: Double?
    /// A broadcast's upload extension (its identifier); absent for other sessions.
    public var service: String?
    /// Where viewers watch, once the extension said (`updateBroadcastURL`).
    public var broadcastURL: String?
    /// The extension's latest `updateServiceInfo`, as strings.
    public var serviceInfo: [String: String]?
    /// True while a broadcast is paused.
    public var paused: Bool?
    /// A broadcast's pictures the extension could not take in time (dropped whole, before it saw them).
    public var extensionFramesDropped: Int?

    public init(id: String, kind: Kind = .recording, state: State, clientPID: Int32, outputPath: String,
                display: String, width: Int, height: Int, framesPerSecond: Int, elapsedSeconds: Double = 0,
                framesWritten: Int = 0, framesDropped: Int = 0, bytesWritten: Int64 = 0,
                microphoneOn: Bool = false, microphoneRecorded: Bool = false, systemAudioRecorded: Bool = false,
                encoder: String = "", warnings: [String] = [], error: ReplayError? = nil) {
        self.id = id
        self.kind = kind
        self.state = state
        self.clientPID = clientPID
        self.outputPath = outputPath
        self.display = display
        self.width = width
        self.height = height
        self.framesPerSecond = framesPerSecond
        self.elapsedSeconds = elapsedSeconds
        self.framesWritten = framesWritten
        self.framesDropped = framesDropped
        self.bytesWritten = bytesWritten
        self.microphoneOn = microphoneOn
        self.microphoneRecorded = microphoneRecorded
        self.systemAudioRecorded = systemAudioRecorded
        self.encoder = encoder
        self.warnings = warnings
        self.error = error
    }
}
