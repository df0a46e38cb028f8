import CPipeWire
import CPortal
import CYUV
package import ReplayMedia
package import Logging
#if canImport(Glibc)
import Glibc
#endif

/// One application's windows on GNOME (Wayland), never a crop of the screen: OpenReplayKit's GNOME
/// Shell extension (dist/gnome-shell/, answering replayd only) names the windows of the process
/// `processID` and every process below it, with their frame rectangles and stacking; Mutter's own
/// `org.gnome.Mutter.ScreenCast` records each window alone (`RecordWindow`: the compositor renders
/// the window's own buffer, so another window over it is not in the stream), one PipeWire stream per
/// window. The windows are composited at their frame positions, in their stacking order among
/// themselves, on black, on a canvas of the stage's size (the monitor's, with one monitor): the same
/// picture as ``ApplicationCapture`` makes on X11.
///
/// The window list is asked again when the extension says `WindowsChanged` (a window of the app
/// opened, closed, moved, restacked) and at least every `listInterval` (a child process's first
/// window: the extension cannot tell that it is the app's). A window that is not shown (minimized,
/// on another workspace) is not composited; its stream is kept. GNOME shows its screencast
/// indicator while a window is recorded. The canvas keeps its first size.
///
/// After `init`, used by the capture thread only (the GIO and PipeWire handles are owned here and
/// touched from one thread at a time).
package final class GnomeWindowCapture: FrameSource, @unchecked Sendable {
    package let outputWidth: Int
    package let outputHeight: Int
    package private(set) var current: VideoFrame

    private let shell: OpaquePointer
    private let logger: Logger
    private let rootProcess: Int32
    private let framesPerSecond: Int
    private let canvasWidth: Int
    private let canvasHeight: Int
    private let canvas: UnsafeMutablePointer<UInt32>
    /// The app's windows, bottom to top, as last reported.
    private var windows: [ork_gnome_window] = []
    private var streams: [UInt64: WindowStream] = [:]
    /// Windows whose cast failed to open, not tried again before this time (monotonic ns).
    private var failedUntil: [UInt64: Int64] = [:]
    private var lastList: Int64 = 0
    private var needsCompose = true

    /// How often the window list is asked for without a `WindowsChanged`.
    private static let listInterval: Int64 = 250_000_000
    private static let callTimeout: Int32 = 3_000
    private static let maximumWindows = 64
    private static let firstPictureTimeout: Int64 = 2_000_000_000

    /// Whether OpenReplayKit's GNOME Shell extension answers this process on the session bus: nil
    /// when it does, else why not (for the refusal and `replay doctor`). Blocking: a thread of its own.
    package static func extensionProblem() -> String? {
        var message = [CChar](repeating: 0, count: 400)
        guard let shell = ork_gnome_shell_open(nil, &message, message.count) else { return Self.text(message) }
        defer { ork_gnome_shell_close(shell) }
        var width: Int32 = 0, height: Int32 = 0, status: Int32 = 0
        return ork_gnome_shell_screen_size(shell, &width, &height, callTimeout, &status, &message, message.count) == 1
            ? nil : Self.text(message)
    }

    /// Connects to the extension and Mutter, and opens a stream for each window the app shows now.
    /// Blocking: call it from a thread of its own.
    /// Each window's stream is asked for at most `framesPerSecond` pictures a second.
    package init(processID: Int32, framesPerSecond: Int, logger: Logger) throws(CaptureError) {
        var message = [CChar](repeating: 0, count: 512)
        guard let shell = ork_gnome_shell_open(nil, &message, message.count) else {
            throw CaptureError(.unsupported, Self.text(message))
        }
        var width: Int32 = 0, height: Int32 = 0, status: Int32 = 0
        guard ork_gnome_shell_screen_size(shell, &width, &height, Self.callTimeout, &status, &message, message.count) == 1 else {
            ork_gnome_shell_close(shell)
            throw CaptureError(.unsupported, Self.text(message))
        }
        guard width >= 2, height >= 2 else {
            ork_gnome_shell_close(shell)
            throw CaptureError(.lost, "GNOME Shell gave no screen size (\(width)x\(height))")
        }
        self.shell = shell
        self.logger = logger
        self.framesPerSecond = framesPerSecond
        rootProcess = processID
        canvasWidth = Int(width)
        canvasHeight = Int(height)
        canvas = UnsafeMutablePointer<UInt32>.allocate(capacity: canvasWidth * canvasHeight)
        canvas.initialize(repeating: 0xff00_0000, count: canvasWidth * canvasHeight)
        outputWidth = canvasWidth & ~1
        outputHeight = canvasHeight & ~1
        current = VideoFrame(width: outputWidth, height: outputHeight)
        current.convert(fromBGRA: UnsafeRawPointer(canvas).assumingMemoryBound(to: UInt8.self), stride: canvasWidth * 4,
                        rows: 0..<outputHeight)
        current.changedBlocks.markAll()
        try refreshWindows(now: MonotonicClock.now())
        // The first picture holds the windows: Mutter sends each stream's first picture at once.
        let deadline = MonotonicClock.now() + Self.firstPictureTimeout
        for stream in streams.values { stream.waitForFirstPicture(until: deadline) }
        _ = try update()
        logger.info("recording an app's own windows through GNOME Shell and Mutter's screen cast",
                    metadata: ["size": "\(canvasWidth)x\(canvasHeight)", "windows": "\(windows.count)"])
    }

    deinit {
        streams.removeAll()   // each closes its PipeWire stream, then its Mutter session
        ork_gnome_shell_close(shell)
        canvas.deallocate()
    }

    /// Nothing of replayd's is in a window's stream: no window to leave out.
    package func exclude(window: UInt32) {}
    package func prime() {}

    package func update() throws(CaptureError) -> Bool {
        current.changedFraction = 0
        let now = MonotonicClock.now()
        if ork_gnome_shell_changed(shell) != 0 || now - lastList >= Self.listInterval {
            try refreshWindows(now: now)
        }
        for window in windows where window.shown != 0 {
            guard let stream = streams[window.id] else { continue }
            switch stream.take() {
            case .newPicture: needsCompose = true
            case .unchanged: break
            case .ended(let why):
                logger.debug("a window's stream ended", metadata: ["window": "\(window.id)", "why": "\(why)"])
                streams[window.id] = nil
                lastList = 0
                needsCompose = true
            }
        }
        guard needsCompose else { return false }
        needsCompose = false
        compose()
        return true
    }

    /// Asks the extension for the app's windows; opens a stream for each new one, closes those of
    /// windows gone.
    private func refreshWindows(now: Int64) throws(CaptureError) {
        lastList = now
        let pids = Array(ProcessTree.members(rootedAt: rootProcess)).map { UInt32(bitPattern: $0) }
        var found = [ork_gnome_window](repeating: ork_gnome_window(), count: Self.maximumWindows)
        var status: Int32 = 0
        var message = [CChar](repeating: 0, count: 512)
        let count = ork_gnome_shell_windows(shell, pids, pids.count, &found, found.count, Self.callTimeout, &status,
                                            &message, message.count)
        guard count >= 0 else {
            // The extension disabled (or GNOME Shell restarting) mid-recording: the app's windows
            // cannot be told any more, so nothing of them is shown rather than anything else.
            throw CaptureError(.lost, Self.text(message))
        }
        let listed = Array(found.prefix(min(Int(count), Self.maximumWindows))).sorted { $0.stacking < $1.stacking }
        if listed.map(\.id) != windows.map(\.id) || zip(listed, windows).contains(where: { !Self.samePlace($0, $1) }) {
            needsCompose = true
        }
        windows = listed
        let ids = Set(listed.map(\.id))
        for id in streams.keys where !ids.contains(id) { streams[id] = nil }
        for window in listed where window.shown != 0 && streams[window.id] == nil && (failedUntil[window.id] ?? 0) <= now {
            guard let cast = ork_mutter_window_cast_open(shell, window.id, Self.callTimeout, &message, message.count) else {
                logger.warning("cannot record one of the app's windows: \(Self.text(message))", metadata: ["window": "\(window.id)"])
                failedUntil[window.id] = now + 1_000_000_000
                continue
            }
            let node = ork_mutter_window_cast_node(cast)
            guard let video = ork_pw_video_open(-1, node, 0, "replayd-window", &message, message.count) else {
                ork_mutter_window_cast_close(cast)
                logger.warning("cannot read one of the app's windows: \(Self.text(message))", metadata: ["window": "\(window.id)"])
                failedUntil[window.id] = now + 1_000_000_000
                continue
            }
            streams[window.id] = WindowStream(cast: cast, video: video)
            logger.debug("recording an app window", metadata: ["window": "\(window.id)", "node": "\(node)",
                                                                "frame": "\(window.width)x\(window.height)+\(window.x)+\(window.y)"])
        }
    }

    private static func samePlace(_ a: ork_gnome_window, _ b: ork_gnome_window) -> Bool {
        a.x == b.x && a.y == b.y && a.width == b.width && a.height == b.height && a.shown == b.shown
    }

    /// Black, then each shown window's latest picture at its frame position, bottom to top.
    private func compose() {
        canvas.update(repeating: 0xff00_0000, count: canvasWidth * canvasHeight)
        for window in windows where window.shown != 0 {
            guard let stream = streams[window.id], stream.width > 0 else { continue }
            // The picture is the window's frame (Mutter's crop); never more than the frame reported.
            let width = min(stream.width, Int(window.width)), height = min(stream.height, Int(window.height))
            let left = max(0, Int(window.x)), top = max(0, Int(window.y))
            let right = min(canvasWidth, Int(window.x) + width), bottom = min(canvasHeight, Int(window.y) + height)
            guard right > left, bottom > top else { continue }
            stream.pixels.withUnsafeBufferPointer { pixels in
                for row in top..<bottom {
                    let source = pixels.baseAddress! + (row - Int(window.y)) * stream.width + (left - Int(window.x))
                    (canvas + row * canvasWidth + left).update(from: source, count: right - left)
                }
            }
        }
        current.convert(fromBGRA: UnsafeRawPointer(canvas).assumingMemoryBound(to: UInt8.self), stride: canvasWidth * 4,
                        rows: 0..<outputHeight)
        current.changedBlocks.markAll()
        current.changedFraction = 1
    }

    fileprivate static func text(_ message: [CChar]) -> String {
        String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// One window's Mutter screen cast and its PipeWire stream, with a copy of its latest picture (BGRx).
/// Owns both handles: the stream is closed before the cast's session is stopped.
private final class WindowStream {
    enum Taken { case newPicture, unchanged, ended(String) }

    private let cast: OpaquePointer
    private let video: OpaquePointer
    private var seen: UInt64 = 0
    private(set) var width = 0
    private(set) var height = 0
    private(set) var pixels: [UInt32] = []

    init(cast: OpaquePointer, video: OpaquePointer) {
        self.cast = cast
        self.video = video
    }

    deinit {
        ork_pw_video_close(video)
        ork_mutter_window_cast_close(cast)
    }

    /// Blocks until the stream's first picture has come (or it ended), at most until `deadline`.
    func waitForFirstPicture(until deadline: Int64) {
        _ = ork_pw_video_wait(video, 0, deadline)
    }

    /// Copies the stream's picture when a newer one has come.
    func take() -> Taken {
        if ork_mutter_window_cast_closed(cast) != 0 { return .ended("Mutter closed the window's screen cast") }
        var picture = ork_pw_picture()
        switch ork_pw_video_lock_latest(video, seen, &picture) {
        case 1: break
        case 0: return .unchanged
        default: return .ended(String(cString: ork_pw_video_error(video)))
        }
        defer { ork_pw_video_unlock(video) }
        seen = picture.sequence
        guard let source = picture.pixels, picture.width > 0, picture.height > 0 else { return .unchanged }
        let w = Int(picture.width), h = Int(picture.height), stride = Int(picture.stride)
        if w != width || h != height {
            width = w
            height = h
            pixels = [UInt32](repeating: 0xff00_0000, count: w * h)
        }
        pixels.withUnsafeMutableBufferPointer { target in
            let bytes = UnsafeMutableRawPointer(target.baseAddress!).assumingMemoryBound(to: UInt8.self)
            if Int(picture.order) == ORK_PW_RGBX {
                _ = ABGRToARGB(source, Int32(stride), bytes, Int32(w * 4), Int32(w), Int32(h))
            } else {
                for row in 0..<h { (bytes + row * w * 4).update(from: source + row * stride, count: w * 4) }
            }
        }
        return .newPicture
    }
}
