import ReplayCapture

/// What the engine captures, how it encodes, and for how long: the engine's own configuration, a
/// value built by whoever drives it (replayd from a client's request, `replay-bench` from its flags).
public struct EngineConfiguration: Sendable, Equatable {
    /// The pictures: which display, and which part of it.
    public var video: VideoSource
    /// The sound, in this order: the first is the first track (or the first in the mix).
    public var audio: [AudioSource]
    /// When true, a sound server that cannot be reached is an error; when false, the recording goes
    /// on with pictures only, and says so in `warnings`.
    public var audioRequired: Bool
    /// One mixed track, or one track per source.
    public var audioLayout: AudioLayout
    public var framesPerSecond: Int
    /// Stop by itself after this many seconds; nil runs until stopped.
    public var durationSeconds: Double?
    public var quality: EncodingQuality
    public var encoder: EncoderPreference
    /// libx264 through its own API, told which macroblocks did not change (true), or through
    /// libavcodec as before (false): `replay-bench --libavcodec-x264` sets the two side by side.
    package var x264TakesChangedBlocks = true
    /// What the pictures do when the screen's resolution changes (RandR) during the capture.
    public var screenSizeChanges: ScreenSizeChanges = .scaledToFit

    public init(video: VideoSource, audio: [AudioSource] = [.systemMix], audioRequired: Bool = false,
                audioLayout: AudioLayout = .mixed, framesPerSecond: Int = 30, durationSeconds: Double? = nil,
                quality: EncodingQuality = .medium, encoder: EncoderPreference = .automatic) {
        self.video = video
        self.audio = audio
        self.audioRequired = audioRequired
        self.audioLayout = audioLayout
        self.framesPerSecond = framesPerSecond
        self.durationSeconds = durationSeconds
        self.quality = quality
        self.encoder = encoder
    }
}

/// What a capture of the whole screen, or of one application's windows, does when the screen's
/// resolution changes while it runs. (A region keeps its coordinates either way.)
public enum ScreenSizeChanges: Sendable, Equatable {
    /// The pictures keep their first size: a movie's video track, or a stream's, has one size. The
    /// whole screen's new picture is scaled into it (letterboxed); an application's windows are
    /// composed on a canvas of the first size, cut to it, not scaled.
    case scaledToFit
    /// The pictures take the screen's new size: for a capture with taps only (a frame ring, whose
    /// reader follows a new size: a broadcast's extension, an app's own capture); an engine with a
    /// destination refuses it.
    case followed
}

/// Where the pictures come from.
public enum VideoSource: Sendable, Equatable {
    /// The whole screen of an X display (`:0`).
    case screen(display: String)
    /// One rectangle of it.
    case region(display: String, x: Int, y: Int, width: Int, height: Int)
    /// Only the windows of one application (its process tree), at their places on the screen, on
    /// black elsewhere: what an app's own recording, capture and clips hold (the privacy model).
    case application(display: String, ApplicationScope)

    public var display: String {
        switch self {
        case .screen(let display), .region(let display, _, _, _, _), .application(let display, _): display
        }
    }

    var rectangle: PixelRect? {
        switch self {
        case .screen, .application: nil
        case .region(_, let x, let y, let width, let height): PixelRect(x: x, y: y, width: width, height: height)
        }
    }
}

/// One application as replayd knows it: the process the kernel names at the other end of its
/// socket (`SO_PEERCRED`), with every process below it. Never what the app claims about itself.
public struct ApplicationScope: Sendable, Hashable {
    public var processID: Int32
    public init(processID: Int32) { self.processID = processID }
}

/// Where a sound comes from.
public enum AudioSource: Sendable, Equatable {
    /// What the computer plays: the default sink's monitor.
    case systemMix
    /// The default input.
    case microphone
    /// Only the sound one application plays (a monitor of each of its sink-inputs).
    case application(ApplicationScope)

    /// The name of its track when tracks are separate.
    public var trackName: String {
        switch self {
        case .systemMix: "System sound"
        case .microphone: "Microphone"
        case .application: "Application sound"
        }
    }
}

public enum AudioLayout: Sendable, Equatable {
    /// Every source mixed on one track.
    case mixed
    /// One track per source, in the configuration's order.
    case separateTracks
}

/// Encoder effort: `medium` is libx264's `veryfast` preset (OBS's default for screen content);
/// `low` is `ultrafast` (least CPU, larger files); `high` is `faster` with a lower CRF.
public enum EncodingQuality: Sendable, Equatable, CaseIterable {
    case low, medium, high

    var x264: (preset: String, crf: Int) {
        switch self {
        case .low: ("ultrafast", 26)
        case .medium: ("veryfast", 23)
        case .high: ("faster", 20)
        }
    }
}

/// Which H.264 encoder.
public enum EncoderPreference: Sendable, Equatable, CaseIterable {
    /// VA-API where a working render node exists, else libx264 (the fallback is logged).
    case automatic
    case x264
    case vaapi
}
