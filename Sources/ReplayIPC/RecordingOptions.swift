/// What `replay record` asks replayd for. Pure values: they cross the control socket as JSON.
public struct RecordingOptions: Codable, Sendable, Equatable {
    /// Where the movie goes, absolute. The CLI resolves relative paths and the default
    /// (`$XDG_VIDEOS_DIR` or `~/Videos`, `Screen Recording YYYY-MM-DD at HH.MM.SS.mp4`).
    public var outputPath: String
    /// Stop by itself after this many seconds; nil runs until stopped.
    public var durationSeconds: Double?
    /// Record the default PulseAudio source (the microphone).
    public var microphone: Bool
    /// Record the default sink's monitor (what the computer plays).
    public var systemAudio: Bool
    /// True when the user asked for audio explicitly (`--mic`): then a missing PulseAudio is an
    /// error instead of a warning and a video-only recording.
    public var audioRequired: Bool
    /// X display name such as `:0`.
    public var display: String
    /// Part of the screen to record; nil is the whole screen.
    public var region: Region?
    public var framesPerSecond: Int
    public var quality: Quality
    public var encoder: EncoderChoice
    /// Keep system audio and microphone in two AAC tracks instead of one mixed track.
    public var separateAudioTracks: Bool

    public init(outputPath: String, durationSeconds: Double? = nil, microphone: Bool = false,
                systemAudio: Bool = true, audioRequired: Bool = false, display: String,
                region: Region? = nil, framesPerSecond: Int = 30, quality: Quality = .medium,
                encoder: EncoderChoice = .auto, separateAudioTracks: Bool = false) {
        self.outputPath = outputPath
        self.durationSeconds = durationSeconds
        self.microphone = microphone
        self.systemAudio = systemAudio
        self.audioRequired = audioRequired
        self.display = display
        self.region = region
        self.framesPerSecond = framesPerSecond
        self.quality = quality
        self.encoder = encoder
        self.separateAudioTracks = separateAudioTracks
    }
}

/// A rectangle of the screen, written `WxH+X+Y` as X11 geometry is.
public struct Region: Codable, Sendable, Equatable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public var x: Int
    public var y: Int

    public init(width: Int, height: Int, x: Int, y: Int) {
        self.width = width
        self.height = height
        self.x = x
        self.y = y
    }

    /// Parses `WxH+X+Y` (X and Y may be omitted: `WxH` is at +0+0). Nil when malformed.
    public init?(geometry: String) {
        let parts = geometry.split(separator: "+", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 3 else { return nil }
        let size = parts[0].split(separator: "x")
        guard size.count == 2, let w = Int(size[0]), let h = Int(size[1]), w > 0, h > 0 else { return nil }
        var x = 0, y = 0
        if parts.count == 3 {
            guard let px = Int(parts[1]), let py = Int(parts[2]) else { return nil }
            x = px
            y = py
        }
        self.init(width: w, height: h, x: x, y: y)
    }

    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
}

/// Encoder effort. `medium`, the default, is libx264's `veryfast` preset (OBS's default for
/// screen content); `low` is `ultrafast` (least CPU, larger files); `high` is `faster` with a lower
/// CRF (sharper text, about 1.5x the CPU of medium).
public enum Quality: String, Codable, Sendable, CaseIterable {
    case low, medium, high
}

public enum EncoderChoice: String, Codable, Sendable, CaseIterable {
    /// VA-API where a working render node exists, else libx264 (the fallback is logged).
    case auto
    case x264
    case vaapi
}

// MARK: - One validation, for `replay` and for replayd

extension RecordingOptions {
    /// The checks `replay record` makes before it asks and replayd makes of any client: the frame
    /// rate, the duration, the region's offsets and the display. Messages name `replay record`'s flags.
    public static func check(framesPerSecond: Int, durationSeconds: Double?, region: Region?, display: String?) throws(ReplayError) {
        guard (1...120).contains(framesPerSecond) else {
            throw ReplayError(.badRequest, "--fps must be between 1 and 120, not \(framesPerSecond).")
        }
        if let duration = durationSeconds, !(duration > 0 && duration.isFinite) {
            throw ReplayError(.badRequest, "--duration must be a positive number of seconds, not \(duration).")
        }
        if let region {
            guard region.width > 0, region.height > 0 else {
                throw ReplayError(.regionOutsideScreen, "--region \(region) has no area: give a width and a height of 1 or more.")
            }
            guard region.x >= 0, region.y >= 0 else {
                throw ReplayError(.regionOutsideScreen, "--region \"\(region)\" starts left of or above the screen: the offsets must be 0 or more.")
            }
        }
        guard let display, !display.isEmpty else {
            throw ReplayError(.noDisplay, "no display: neither WAYLAND_DISPLAY nor DISPLAY is set. Run it in your desktop session, or pass --display (for example --display :0).")
        }
    }

    /// Everything replayd needs to be true of a request: the checks above, and an absolute output path.
    public func validate() throws(ReplayError) {
        guard outputPath.hasPrefix("/") else {
            throw ReplayError(.badRequest, "the output path \"\(outputPath)\" is not absolute: send an absolute path.")
        }
        try Self.check(framesPerSecond: framesPerSecond, durationSeconds: durationSeconds, region: region, display: display)
    }
}
