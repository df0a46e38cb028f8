import CXCB
import CXCBShim
package import ReplayMedia
package import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What the capture pipeline reads pictures from: the whole screen (or a region of it), or one
/// application's windows. Used by the capture thread only, except `exclude(window:)`.
package protocol FrameSource: AnyObject, Sendable {
    var outputWidth: Int { get }
    var outputHeight: Int { get }
    /// The picture, up to date after each `update()` that returned true.
    var current: VideoFrame { get }
    /// Brings `current` up to date; false when nothing visible changed (no work was done).
    func update() throws(CaptureError) -> Bool
    /// Leaves `window` out of every frame from now on (any thread).
    func exclude(window: UInt32)
    /// Redirects (Composite) what later frames read from windows' pixmaps, a moment before time
    /// zero: a pixmap holds a window's pixels once its client has repainted.
    func prime()
    /// Waits (blocking its thread) until something may have changed or until `deadline` (monotonic
    /// ns): true when woken early, so that a picture can be taken at once instead of at the next tick.
    /// A source that cannot tell sleeps to the deadline and says false.
    func waitForChange(until deadline: Int64) -> Bool
    /// True once the person ended the capture from the desktop (Wayland's own stop button): the
    /// engine then finishes as if stopped.
    var endedByPerson: Bool { get }
}

extension FrameSource {
    package var endedByPerson: Bool { false }

    package func waitForChange(until deadline: Int64) -> Bool {
        MonotonicClock.sleep(until: deadline)
        return false
    }
}

/// Captures only the windows of one application: the process `scope` names and every process below
/// it. Its top-level client windows (found through `WM_STATE` under a window manager; their owner by
/// X-Resource, `_NET_WM_PID` only as a fallback) are composited at their screen positions, in their
/// stacking order among themselves, on black, from their Composite pixmaps: a window covered by
/// another application's shows whole, and no pixel is ever read from the screen itself, so none of
/// another window can be in a frame. The canvas is the screen's size.
///
/// Every read happens with the server grabbed, after the window list was brought up to date from
/// the events that came before the grab: what is composited is where the windows are at that
/// moment, also while they open, move, resize or close. A window whose owner cannot be told, or
/// whose pixmap cannot be read, is black. A window's pixmap, when the server makes it (on redirection,
/// mapping or resizing), starts as a copy of what the screen showed there, other windows included:
/// until the window's own client has drawn a pixel (the capture asks it to draw all with an Expose),
/// that pixel is black. Protected windows (`_OPENREPLAYKIT_PROTECTED`) are black
/// in their shape. Only what changed (DAMAGE on each window, or the window list) is composited and
/// converted; a still application costs one event poll per tick.
///
/// RandR: when the screen changes size, a capture that `followsScreenSize` (an app's capture or
/// broadcast, whose pictures go to a frame ring) takes the new size: a new canvas, all black, the
/// application's windows composed on it again (also those the old size cut off), and a new `current`
/// of the new size. Otherwise (an app's recording: a movie's track has one size) the canvas keeps its
/// first size and the windows are cut to it, as they are to the screen.
///
/// After `init`, used only by the capture thread; `exclude(window:)` may be called from any thread.
package final class ApplicationCapture: FrameSource, @unchecked Sendable {
    /// The picture's size: the screen's at the start, even; a capture that `followsScreenSize`
    /// takes the screen's new size after a RandR change (capture thread).
    package private(set) var outputWidth: Int
    package private(set) var outputHeight: Int
    /// The picture, up to date after each `update()` that returned true. A new picture, of the new
    /// size, after the screen's size changed when the capture `followsScreenSize`.
    package private(set) var current: VideoFrame
    /// Whether a RandR change changes the picture's size (true) or leaves it, the windows cut to it (false).
    package let followsScreenSize: Bool

    private let x: XConnection
    private let logger: Logger
    private let census: WindowCensus
    private let rootProcess: Int32
    private var members: Set<Int32> = []
    private var nonMembers: Set<Int32> = []
    /// The canvas's rectangle: the screen's at the start, and its new one after a RandR change when
    /// following. Windows are composed where they meet it.
    private var screenRect: PixelRect
    private var canvas: UnsafeMutablePointer<UInt32>   // what the recording shows
    private var next: UnsafeMutablePointer<UInt32>     // composed here, then compared with `canvas`
    private var scratch: SharedImage                    // a window's pixels land here (up to the canvas's size)
    private let damageEvent: Int
    private let randrEvent: Int
    /// Set when `current` was replaced by a picture of a new size: the next `update` gives it even
    /// when the application shows nothing.
    private var pictureReplaced = false
    private var damages: [xcb_window_t: xcb_damage_damage_t] = [:]
    private var windowOfDamage: [xcb_damage_damage_t: xcb_window_t] = [:]
    /// Windows whose pixmap is not all their own yet: which of its pixels the window's client (or
    /// the server painting its background) has drawn since.
    private var untrusted: [xcb_window_t: CleanMask] = [:]
    private var sizes: [xcb_window_t: (width: Int, height: Int)] = [:]
    private let damageRegion: xcb_xfixes_region_t
    private var redirected: Set<xcb_window_t> = []
    private var appWindows: [TopLevelWindow] = []
    /// Where each picture may hold something other than black (the windows' bounding box).
    private var canvasExtent = PixelRect(x: 0, y: 0, width: 0, height: 0)
    private var nextExtent = PixelRect(x: 0, y: 0, width: 0, height: 0)
    private var needsCompose = true
    private let excludedWindows = Mutex<[UInt32]>([])
    /// Damage taken by `waitForChange`, for the next `update`.
    private var pendingDamage: Set<xcb_damage_damage_t> = []
    private var pendingChange = false

    /// Opens `display` to capture the windows of `processID` and its descendants. With
    /// `followsScreenSize`, the pictures take the screen's new size when it changes.
    package init(display: String, processID: Int32, followsScreenSize: Bool = false, logger: Logger) throws(CaptureError) {
        let x: XConnection
        do { x = try XConnection(display: display) } catch { throw CaptureError(.unknownDisplay, error.message) }
        let connection = x.connection
        guard ork_xcb_has_shm(connection) != 0 else {
            throw CaptureError(.unsupported, "X display \(display) has no MIT-SHM extension; replayd needs it to read windows")
        }
        guard WindowCensus.hasExtension("Composite", connection) else {
            throw CaptureError(.unsupported, "X display \(display) has no Composite extension, which an application's own capture needs")
        }
        let depth = x.screen.pointee.root_depth
        guard depth == 24 || depth == 32, x.bitsPerPixel(depth: depth) == 32 else {
            throw CaptureError(.unsupported, "X display \(display) has depth \(depth); replayd records 24- and 32-bit displays")
        }
        let damageEvent = Int(ork_xcb_damage_first_event(connection))
        guard damageEvent >= 0 else {
            throw CaptureError(.unsupported, "X display \(display) lacks DAMAGE, which replayd needs")
        }
        free(xcb_damage_query_version_reply(connection, xcb_damage_query_version(connection, 1, 1), nil))
        free(xcb_composite_query_version_reply(connection, xcb_composite_query_version(connection, 0, 4), nil))
        free(xcb_xfixes_query_version_reply(connection, xcb_xfixes_query_version(connection, 4, 0), nil))
        // Screen size changes (RandR): followed, or at least noticed (the canvas keeps its size).
        let randrEvent = Int(ork_xcb_randr_first_event(connection))
        if randrEvent >= 0 {
            free(xcb_randr_query_version_reply(connection, xcb_randr_query_version(connection, 1, 5), nil))
            xcb_randr_select_input(connection, x.root, UInt16(XCB_RANDR_NOTIFY_MASK_SCREEN_CHANGE.rawValue))
        }
        let size = x.rootSize()
        let screen = PixelRect(x: 0, y: 0, width: size.width, height: size.height)
        guard let scratch = SharedImage(owner: x, byteCount: screen.area * 4) else {
            throw CaptureError(.unsupported, "cannot share memory with the X server of \(display) (MIT-SHM attach failed)")
        }
        self.x = x
        self.logger = logger
        self.followsScreenSize = followsScreenSize
        self.rootProcess = processID
        self.census = WindowCensus(x: x)
        self.screenRect = screen
        self.scratch = scratch
        self.damageEvent = damageEvent
        self.randrEvent = randrEvent
        self.damageRegion = xcb_generate_id(connection)
        xcb_xfixes_create_region(connection, damageRegion, 0, nil)
        let canvas = UnsafeMutablePointer<UInt32>.allocate(capacity: screen.area)
        canvas.initialize(repeating: 0xff00_0000, count: screen.area)
        let next = UnsafeMutablePointer<UInt32>.allocate(capacity: screen.area)
        next.initialize(repeating: 0xff00_0000, count: screen.area)
        self.canvas = canvas
        self.next = next
        outputWidth = screen.width & ~1
        outputHeight = screen.height & ~1
        current = VideoFrame(width: screen.width & ~1, height: screen.height & ~1)
        current.convert(fromBGRA: UnsafeRawPointer(canvas).assumingMemoryBound(to: UInt8.self), stride: screen.width * 4,
                        rows: 0..<(screen.height & ~1))
        current.changedBlocks.markAll()
    }

    deinit {
        for damage in damages.values { xcb_damage_destroy(x.connection, damage) }
        xcb_xfixes_destroy_region(x.connection, damageRegion)
        xcb_flush(x.connection)
        canvas.deallocate()
        next.deallocate()
    }

    package func exclude(window: UInt32) {
        excludedWindows.withLock { $0.append(window) }
    }

    package func prime() {
        census.refresh()
        chooseWindows()
        xcb_flush(x.connection)
    }

    package func update() throws(CaptureError) -> Bool {
        current.changedFraction = 0
        guard !x.hasFailed else { throw CaptureError(.lost, "the connection to X display \(x.displayName) was lost: \(x.failure)") }
        var notified = pendingDamage
        var changed = drainEvents(into: &notified) || pendingChange || needsCompose
        pendingDamage = []
        pendingChange = false
        guard changed else { return false }
        let connection = x.connection
        // From here to the last read the windows cannot change: the list and the pixels agree.
        xcb_grab_server(connection)
        defer {
            xcb_ungrab_server(connection)
            xcb_flush(connection)
        }
        free(xcb_get_input_focus_reply(connection, xcb_get_input_focus(connection), nil))
        changed = drainEvents(into: &notified) || changed
        if census.isStale || needsCompose {
            census.refresh()
            chooseWindows()
        }
        for damage in notified {
            if let window = windowOfDamage[damage], untrusted[window] != nil {
                // Which pixels the window's own drawing covered: those are its own now.
                xcb_damage_subtract(connection, damage, 0, damageRegion)
                markClean(window)
            } else {
                xcb_damage_subtract(connection, damage, 0, 0)
            }
        }
        needsCompose = false
        guard let (rows, whole) = compose() else {
            // Nothing of the application's differs from black, but a picture of the new size does.
            guard pictureReplaced else { return false }
            pictureReplaced = false
            current.changedFraction = 1
            return true
        }
        let width = screenRect.width
        if whole {
            // Composed over half the screen: the new picture is `next`, as it is.
            swap(&canvas, &next)
            swap(&canvasExtent, &nextExtent)
        } else {
            // The rows outside `rows` are the same in both: the pictures are now equal.
            (canvas + rows.lowerBound * width).update(from: next + rows.lowerBound * width, count: rows.count * width)
            canvasExtent = nextExtent
        }
        let outputRows = rows.lowerBound & ~1 ..< min(outputHeight, (rows.upperBound + 1) & ~1)
        if !outputRows.isEmpty {
            current.convert(fromBGRA: UnsafeRawPointer(canvas).assumingMemoryBound(to: UInt8.self), stride: width * 4, rows: outputRows)
            // The encoder is told which macroblocks changed (mb_info): these rows, the whole width.
            current.changedBlocks.mark(x: 0..<outputWidth, y: outputRows)
        }
        current.changedFraction = pictureReplaced ? 1 : Double(rows.count) / Double(max(1, screenRect.height))
        pictureReplaced = false
        return true
    }

    /// Waits on the X connection: the application's drawing (DAMAGE) or a change of the window list
    /// wakes it, so its picture is taken when it draws instead of up to a frame later.
    package func waitForChange(until deadline: Int64) -> Bool {
        while !x.hasFailed {
            if drainEvents(into: &pendingDamage) { pendingChange = true }
            if pendingChange || needsCompose { return true }
            guard x.waitForInput(until: deadline) else { return false }
        }
        return false
    }

    /// Takes every waiting event: damage to the application's windows, and changes of the window
    /// list. Returns true when something may look different.
    private func drainEvents(into notified: inout Set<xcb_damage_damage_t>) -> Bool {
        var changed = false
        while let event = xcb_poll_for_event(x.connection) {
            let type = Int(event.pointee.response_type & 0x7f)
            if type == damageEvent + Int(XCB_DAMAGE_NOTIFY) {
                let damage = UnsafeMutableRawPointer(event).assumingMemoryBound(to: xcb_damage_notify_event_t.self).pointee.damage
                notified.insert(damage)
                changed = true
            } else if randrEvent >= 0, type == randrEvent + Int(XCB_RANDR_SCREEN_CHANGE_NOTIFY) {
                screenChanged()
                changed = true
            } else if census.note(event) {
                changed = true
            }
            free(event)
        }
        return changed
    }

    /// The application's windows among the display's, each redirected and watched for damage.
    private func chooseWindows() {
        let connection = x.connection
        let excluded = Set(excludedWindows.withLock { $0 })
        let pids = census.windows.flatMap { [$0.pid] + $0.inner.map(\.pid) }.compactMap { $0 }
        if pids.contains(where: { !members.contains($0) && !nonMembers.contains($0) }) {
            // A window of a process not seen before: the application may have started a child.
            members = ProcessTree.members(rootedAt: rootProcess)
            nonMembers = Set(pids).subtracting(members)
        }
        appWindows = census.windows.filter { window in
            guard let pid = window.pid, members.contains(pid), !window.isSystemUI else { return false }
            return !excluded.contains(window.frame) && !excluded.contains(window.client)
                && (window.clientDepth == 24 || window.clientDepth == 32)
        }
        let clients = Set(appWindows.map(\.client))
        for window in appWindows {
            let size = (window.clientRect.width, window.clientRect.height)
            if !redirected.contains(window.client) {
                xcb_composite_redirect_window(connection, window.client, UInt8(XCB_COMPOSITE_REDIRECT_AUTOMATIC.rawValue))
                redirected.insert(window.client)
                let damage = xcb_generate_id(connection)
                xcb_damage_create(connection, damage, window.client, UInt8(XCB_DAMAGE_REPORT_LEVEL_NON_EMPTY.rawValue))
                damages[window.client] = damage
                windowOfDamage[damage] = window.client
                logger.debug("application window 0x\(String(window.client, radix: 16)) at \(window.clientRect)")
            } else if let before = sizes[window.client], before == size {
                continue
            }
            // A new pixmap (redirected now, or resized): a copy of the screen until the client draws.
            sizes[window.client] = size
            untrusted[window.client] = CleanMask(width: size.0, height: size.1)
            census.askToRedraw(window.client, width: size.0, height: size.1)
        }
        for (window, damage) in damages where !clients.contains(window) {
            xcb_damage_destroy(connection, damage)
            damages[window] = nil
            windowOfDamage[damage] = nil
            redirected.remove(window)
            untrusted[window] = nil
            sizes[window] = nil
        }
    }

    // MARK: Size changes (RandR)

    /// The screen changed size. Following, the canvas takes the new size: new buffers, all black
    /// (nothing of the old picture is kept, so nothing but what is composed next can show), and the
    /// application's windows composed on them again, where they meet the new screen. Not following,
    /// the canvas stays as it is (the windows are cut to it as before).
    private func screenChanged() {
        let size = x.rootSize()
        let full = PixelRect(x: 0, y: 0, width: size.width, height: size.height)
        guard full.width != screenRect.width || full.height != screenRect.height else { return }
        needsCompose = true
        guard followsScreenSize else {
            logger.notice("the screen changed to \(full.width)x\(full.height); the application's pictures stay \(outputWidth)x\(outputHeight), its windows cut to them")
            return
        }
        guard full.width >= 2, full.height >= 2, let newScratch = SharedImage(owner: x, byteCount: full.area * 4) else {
            logger.error("the screen changed to \(full.width)x\(full.height) and its memory could not be shared; the application's pictures keep \(outputWidth)x\(outputHeight)")
            return
        }
        logger.notice("the screen changed to \(full.width)x\(full.height); the application's pictures follow (they were \(outputWidth)x\(outputHeight))")
        scratch = newScratch
        canvas.deallocate()
        next.deallocate()
        canvas = UnsafeMutablePointer<UInt32>.allocate(capacity: full.area)
        canvas.initialize(repeating: 0xff00_0000, count: full.area)
        next = UnsafeMutablePointer<UInt32>.allocate(capacity: full.area)
        next.initialize(repeating: 0xff00_0000, count: full.area)
        canvasExtent = PixelRect(x: 0, y: 0, width: 0, height: 0)
        nextExtent = canvasExtent
        screenRect = full
        outputWidth = full.width & ~1
        outputHeight = full.height & ~1
        current = VideoFrame(width: outputWidth, height: outputHeight)
        current.convert(fromBGRA: UnsafeRawPointer(canvas).assumingMemoryBound(to: UInt8.self), stride: full.width * 4,
                        rows: 0..<outputHeight)
        current.changedBlocks.markAll()
        pictureReplaced = true
    }

    /// Adds the damage just fetched into `damageRegion` to `window`'s clean pixels.
    private func markClean(_ window: xcb_window_t) {
        let connection = x.connection
        guard let reply = xcb_xfixes_fetch_region_reply(connection, xcb_xfixes_fetch_region(connection, damageRegion), nil) else { return }
        defer { free(reply) }
        let count = Int(xcb_xfixes_fetch_region_rectangles_length(reply))
        guard count > 0, let first = xcb_xfixes_fetch_region_rectangles(reply), var mask = untrusted[window] else { return }
        // Damage is in the window's coordinates; its pixmap (and the mask) starts at its border.
        let border = appWindows.first { $0.client == window }?.clientBorder ?? 0
        for rect in UnsafeBufferPointer(start: first, count: count) {
            mask.mark(PixelRect(x: Int(rect.x) + border, y: Int(rect.y) + border, width: Int(rect.width), height: Int(rect.height)))
        }
        untrusted[window] = mask.isAllClean ? nil : mask
    }

    /// Composes the application's windows into `next`, in the area they cover now or covered last
    /// time (black elsewhere, as it already is), and returns the rows that differ from `canvas`;
    /// `whole` when that area is half the screen or more: then all its rows count as changed
    /// without a comparison (an application repainting that much is a video or a game: it changes).
    private func compose() -> (rows: Range<Int>, whole: Bool)? {
        let connection = x.connection
        let rects = appWindows.map { $0.clientRect.intersection(screenRect) }.filter { !$0.isEmpty }
        let drawn = rects.reduce(PixelRect(x: 0, y: 0, width: 0, height: 0)) { $0.union($1) }
        // Outside this area both pictures are black: what was drawn in either lies inside it.
        let area = drawn.union(nextExtent).union(canvasExtent)
        nextExtent = drawn
        guard !area.isEmpty else { return nil }
        let plane = PixelPlane(pixels: next, stride: screenRect.width, origin: screenRect)
        // Black first, unless the bottom window covers it all with its own pixels (a full-screen
        // application): it is read over all of it anyway (or made black if that fails).
        let bottom = appWindows.first { !$0.clientRect.intersection(screenRect).isEmpty }
        let covered = bottom.map { !$0.isProtected && untrusted[$0.client] == nil && $0.clientRect.intersection(screenRect) == area } ?? false
        if !covered { plane.fill(area, with: 0xff00_0000) }
        let pixels = scratch.address.assumingMemoryBound(to: UInt32.self)
        for window in appWindows {
            let part = window.clientRect.intersection(screenRect)
            guard !part.isEmpty else { continue }
            if window.isProtected {
                for piece in window.shape { plane.fill(piece.intersection(screenRect), with: 0xff00_0000) }
                continue
            }
            let pixmap = xcb_generate_id(connection)
            xcb_composite_name_window_pixmap(connection, window.client, pixmap)
            let cookie = xcb_shm_get_image(connection, pixmap, Int16(part.x - window.clientRect.x), Int16(part.y - window.clientRect.y),
                                           UInt16(part.width), UInt16(part.height), ~0, UInt8(XCB_IMAGE_FORMAT_Z_PIXMAP.rawValue),
                                           scratch.segment, 0)
            var error: UnsafeMutablePointer<xcb_generic_error_t>?
            let reply = xcb_shm_get_image_reply(connection, cookie, &error)
            xcb_free_pixmap(connection, pixmap)
            free(error)
            guard let reply else {
                // Gone or unviewable: it shows nothing (black, where the fill above was skipped for it).
                if covered, window.client == bottom?.client { plane.fill(part, with: 0xff00_0000) }
                continue
            }
            free(reply)
            if let mask = untrusted[window.client] {
                // Only what the window has drawn itself.
                let dx = part.x - window.clientRect.x, dy = part.y - window.clientRect.y
                for row in 0..<part.height {
                    let line = next + (part.y + row) * screenRect.width + part.x
                    for column in 0..<part.width where mask.isClean(x: dx + column, y: dy + row) {
                        line[column] = pixels[row * part.width + column]
                    }
                }
            } else {
                plane.copy(from: pixels, stride: part.width, into: part)
            }
            // Inside it, what is not the application's (another's window reparented into it, or one
            // the server cannot name) and what is protected: black.
            for inner in window.inner where inner.isProtected || !(inner.pid.map(members.contains) ?? false) {
                plane.fill(inner.rect.intersection(part), with: 0xff00_0000)
            }
        }
        if area.area * 2 >= screenRect.area { return (area.y..<area.maxY, true) }
        let width = screenRect.width
        func differs(_ row: Int) -> Bool {
            memcmp(canvas + row * width + area.x, next + row * width + area.x, area.width * 4) != 0
        }
        guard let first = (area.y..<area.maxY).first(where: differs) else { return nil }
        let last = (first..<area.maxY).reversed().first(where: differs) ?? first
        return (first..<(last + 1), false)
    }
}

/// Which pixels of a window's new pixmap its own client has drawn.
struct CleanMask {
    let width: Int
    let height: Int
    private var clean: [Bool]
    private var count = 0

    init(width: Int, height: Int) {
        self.width = max(0, width)
        self.height = max(0, height)
        clean = Array(repeating: false, count: self.width * self.height)
    }

    var isAllClean: Bool { count >= width * height }

    func isClean(x: Int, y: Int) -> Bool {
        x >= 0 && y >= 0 && x < width && y < height && clean[y * width + x]
    }

    mutating func mark(_ rect: PixelRect) {
        let area = rect.intersection(PixelRect(x: 0, y: 0, width: width, height: height))
        guard !area.isEmpty else { return }
        for y in area.y..<area.maxY {
            for x in area.x..<area.maxX where !clean[y * width + x] {
                clean[y * width + x] = true
                count += 1
            }
        }
    }
}
