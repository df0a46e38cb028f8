import CPipeWire
import CPortal
import CYUV
package import ReplayMedia
package import Logging
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The person's screen on a Wayland desktop, through xdg-desktop-portal's ScreenCast and a PipeWire
/// stream (docs/WAYLAND.md). The desktop's own dialog asks the person the first time; the portal's
/// restore token, kept in `tokenFile` (0600), lets later sessions start without it. XWayland is never
/// read: the compositor renders the stream, the cursor embedded, so what is in it is what the person
/// chose to share.
///
/// Compositors send a picture only when something changed: between them `update()` says nothing
/// changed and the engine repeats the last picture on its clock. Only the stream's damage is
/// converted. When the desktop ends the session (its own stop button) `endedByPerson` turns true
/// and the engine finishes the recording as if stopped.
///
/// After `init`, used by the capture thread only.
package final class PortalScreenCapture: FrameSource, @unchecked Sendable {
    package private(set) var outputWidth: Int
    package private(set) var outputHeight: Int
    package private(set) var current: VideoFrame
    package private(set) var endedByPerson = false

    private let cast: OpaquePointer
    private let video: OpaquePointer
    private let logger: Logger
    /// The part of the stream's picture recorded (the whole picture without `--region`).
    private let source: PixelRect
    private let streamSize: (width: Int, height: Int)
    private var seen: UInt64 = 0
    private var convertedOnce = false
    /// RGBx pictures are swapped into BGRx here first; a resized stream is scaled here (letterboxed).
    private var scratch: UnsafeMutableRawPointer?
    private var scratchBytes = 0

    /// How long the person may take to answer the desktop's dialog.
    private static let dialogTimeout: Int32 = 120_000
    /// How long the first picture may take once the stream is connected (GNOME's comes in
    /// milliseconds; wlroots sends none of a still screen, and the recording then starts black).
    private static let firstPictureTimeout: Int64 = 1_500_000_000

    /// Opens the portal session (the dialog, unless a kept token restores it), then the stream, and
    /// waits for its first picture. Blocking: call it from a thread of its own.
    package init(region: PixelRect?, framesPerSecond: Int, tokenFile: String?, logger: Logger) throws(CaptureError) {
        self.logger = logger
        let token = tokenFile.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        var status: Int32 = 0
        var message = [CChar](repeating: 0, count: 512)
        guard let cast = ork_portal_cast_open(nil, token, Self.dialogTimeout, &status, &message, message.count) else {
            let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            switch Int(status) {
            case ORK_PORTAL_CANCELLED: throw CaptureError(.declined, text)
            case ORK_PORTAL_UNAVAILABLE: throw CaptureError(.unsupported, text)
            default: throw CaptureError(.lost, text)
            }
        }
        self.cast = cast
        if let tokenFile {
            Self.keep(token: String(cString: ork_portal_cast_restore_token(cast)), in: tokenFile, logger: logger)
        }
        let fd = ork_portal_cast_take_fd(cast)
        guard let video = ork_pw_video_open(fd, ork_portal_cast_node(cast), Int32(framesPerSecond), "replayd", &message, message.count) else {
            ork_portal_cast_close(cast)
            throw CaptureError(.lost, String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        self.video = video
        var portalWidth: Int32 = 0, portalHeight: Int32 = 0
        ork_portal_cast_size(cast, &portalWidth, &portalHeight)
        // The stream's own size comes with its first picture; a still screen on some compositors
        // sends none until something is drawn, and then the portal's word stands.
        var size = (width: Int(portalWidth), height: Int(portalHeight))
        let first = ork_pw_video_wait(video, 0, MonotonicClock.now() + Self.firstPictureTimeout)
        if first < 0 {
            let why = String(cString: ork_pw_video_error(video))
            ork_pw_video_close(video)
            ork_portal_cast_close(cast)
            throw CaptureError(.lost, "the screen-cast stream ended before its first picture: \(why)")
        }
        var picture = ork_pw_picture()
        if first > 0, ork_pw_video_lock_latest(video, 0, &picture) == 1 {
            size = (Int(picture.width), Int(picture.height))
            ork_pw_video_unlock(video)
        } else {
            logger.notice("the desktop sent no picture yet (a still screen): the first is black until it draws")
        }
        guard size.width >= 2, size.height >= 2 else {
            ork_pw_video_close(video)
            ork_portal_cast_close(cast)
            throw CaptureError(.lost, "the screen-cast stream sent no picture in 1.5 s and the portal gave no size")
        }
        let full = PixelRect(x: 0, y: 0, width: size.width, height: size.height)
        let wanted = region ?? full
        guard wanted.width >= 2, wanted.height >= 2, full.contains(wanted) else {
            ork_pw_video_close(video)
            ork_portal_cast_close(cast)
            throw CaptureError(.regionOutsideScreen,
                               "the region \(wanted.width)x\(wanted.height)+\(wanted.x)+\(wanted.y) is not inside the shared screen (\(size.width)x\(size.height))")
        }
        streamSize = size
        source = wanted
        outputWidth = wanted.width & ~1
        outputHeight = wanted.height & ~1
        current = VideoFrame(width: outputWidth, height: outputHeight)
        // Black until the desktop's first picture (a still screen on wlroots sends none until it draws).
        let black = [UInt32](repeating: 0xff00_0000, count: outputWidth)
        black.withUnsafeBytes { row in
            current.convert(fromBGRA: row.baseAddress!.assumingMemoryBound(to: UInt8.self), stride: 0, rows: 0..<outputHeight)
        }
        logger.info("recording the screen through the desktop's screen-cast portal",
                    metadata: ["size": "\(size.width)x\(size.height)", "node": "\(ork_portal_cast_node(cast))"])
    }

    deinit {
        ork_pw_video_close(video)
        ork_portal_cast_close(cast)
        scratch?.deallocate()
    }

    /// `scratch`, at least `bytes` long.
    private func scratch(_ bytes: Int) -> UnsafeMutablePointer<UInt8> {
        if scratchBytes < bytes {
            scratch?.deallocate()
            scratch = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
            scratchBytes = bytes
        }
        return scratch!.assumingMemoryBound(to: UInt8.self)
    }

    /// Nothing to leave out: the compositor renders the stream, and replayd draws no window of its own on it.
    package func exclude(window: UInt32) {}
    package func prime() {}

    package func waitForChange(until deadline: Int64) -> Bool {
        ork_pw_video_wait(video, seen, deadline) != 0
    }

    package func update() throws(CaptureError) -> Bool {
        current.changedFraction = 0
        if !endedByPerson, ork_portal_cast_closed(cast) != 0 {
            logger.notice("the desktop ended the screen sharing (its own stop button): finishing the recording")
            endedByPerson = true
        }
        var picture = ork_pw_picture()
        switch ork_pw_video_lock_latest(video, seen, &picture) {
        case 1: break
        case 0: return false
        default:
            if endedByPerson || ork_portal_cast_closed(cast) != 0 {
                endedByPerson = true
                return false
            }
            throw CaptureError(.lost, "the screen-cast stream ended: \(String(cString: ork_pw_video_error(video)))")
        }
        defer { ork_pw_video_unlock(video) }
        seen = picture.sequence
        guard let pixels = picture.pixels else { return false }
        var stride = Int(picture.stride)
        var bytes = pixels
        let width = Int(picture.width), height = Int(picture.height)
        if Int(picture.order) == ORK_PW_RGBX {
            let swapped = scratch(width * height * 4)
            _ = ABGRToARGB(pixels, Int32(stride), swapped, Int32(width * 4), Int32(width), Int32(height))
            stride = width * 4
            bytes = UnsafePointer(swapped)
        }
        guard width == streamSize.width, height == streamSize.height else {
            letterbox(bytes, stride: stride, width: width, height: height)
            return true
        }
        let origin = bytes + source.y * stride + source.x * 4
        let bounds = PixelRect(x: 0, y: 0, width: outputWidth, height: outputHeight)
        var areas: [PixelRect]
        if picture.all_changed != 0 || !convertedOnce {
            areas = [bounds]
        } else {
            areas = withUnsafeBytes(of: picture.damage) { raw in
                Array(raw.bindMemory(to: ork_pw_rect.self).prefix(Int(picture.damage_count)))
            }.map {
                PixelRect(x: Int($0.x) - source.x, y: Int($0.y) - source.y, width: Int($0.width), height: Int($0.height))
                    .intersection(bounds)
            }.filter { !$0.isEmpty }
        }
        convertedOnce = true
        guard !areas.isEmpty else { return false }
        for area in areas {
            current.convert(fromBGRA: origin, stride: stride, columns: area.x..<area.maxX, rows: area.y..<area.maxY)
            current.changedBlocks.mark(x: (area.x & ~1)..<((area.maxX + 1) & ~1), y: (area.y & ~1)..<((area.maxY + 1) & ~1))
        }
        current.changedFraction = min(1, Double(areas.reduce(0) { $0 + $1.area }) / Double(max(1, bounds.area)))
        return true
    }

    /// The stream changed size (a monitor's mode changed): the recording keeps its size, the new
    /// picture scaled to fit and centred on black, as for an X screen.
    private func letterbox(_ bytes: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int) {
        let scale = min(Double(outputWidth) / Double(width), Double(outputHeight) / Double(height))
        let w = max(2, Int(Double(width) * scale) & ~1), h = max(2, Int(Double(height) * scale) & ~1)
        let ox = (outputWidth - w) / 2, oy = (outputHeight - h) / 2
        // Its own buffer: `bytes` may be the scratch already (an RGBx picture).
        let canvas = UnsafeMutablePointer<UInt32>.allocate(capacity: outputWidth * outputHeight)
        defer { canvas.deallocate() }
        canvas.initialize(repeating: 0xff00_0000, count: outputWidth * outputHeight)
        let target = UnsafeMutableRawPointer(canvas).assumingMemoryBound(to: UInt8.self)
        _ = ARGBScale(bytes, Int32(stride), Int32(width), Int32(height),
                      target + oy * outputWidth * 4 + ox * 4, Int32(outputWidth * 4), Int32(w), Int32(h), kFilterBilinear)
        current.convert(fromBGRA: target, stride: outputWidth * 4, rows: 0..<outputHeight)
        current.changedBlocks.markAll()
        current.changedFraction = 1
    }

    /// Keeps the portal's new token (tokens are single-use) where only this user can read it.
    private static func keep(token: String, in path: String, logger: Logger) {
        let folder = (path as NSString).deletingLastPathComponent
        guard !token.isEmpty else {
            unlink(path)
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            let temporary = path + ".new"
            unlink(temporary)
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw CaptureError(.lost, "cannot write \(temporary): \(String(cString: strerror(errno)))") }
            let written = token.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
            close(fd)
            guard written == token.utf8.count, rename(temporary, path) == 0 else {
                unlink(temporary)
                throw CaptureError(.lost, "cannot keep the screen-sharing permission in \(path)")
            }
        } catch {
            logger.warning("the desktop will ask again next time: \(error)")
        }
    }
}
