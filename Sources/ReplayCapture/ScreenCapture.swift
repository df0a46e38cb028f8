import CXCB
import CYUV
import CXCBShim
package import ReplayMedia
package import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Captures an X11 screen (or a region of it) into an I420 `VideoFrame`, doing only the work
/// that what changed needs:
/// - XDamage says which part of the screen was drawn; only that part is read (MIT-SHM). A part
///   drawn with the same pixels as before changes nothing (no frame); of the rest, only the rows
///   that changed are copied into the canvas and converted (libyuv). A static screen costs one
///   damage check and one cursor query per tick.
/// - The cursor (XFixes) is composited in, with the pixels beneath kept to undo it next frame.
/// - Windows passed to `exclude(window:)` (replayd's own indicator) and OpenReplayKit's own windows
///   (WM_CLASS `openreplaykit-…`, `replayd-indicator`: the consent prompt, the preview) are left out:
///   what lies beneath them is recomposed from the other windows' Composite pixmaps.
/// - Protected windows (`_OPENREPLAYKIT_PROTECTED` = 1) are opaque black in their shape, except
///   where another window covers them.
/// - Reads happen with the server grabbed, after the window list was brought up to date from the
///   events before the grab: what is left out or blanked is where it is at that moment.
/// - RandR: when the screen size changes, the recording keeps its size; the new screen is scaled
///   to fit, letterboxed. A capture that `followsScreenSize` (a broadcast's, whose pictures go to a
///   frame ring, not into a one-size track) takes the new size instead: `current` is replaced by a
///   picture of the screen's new size, read whole.
///
/// After `init`, used only by the capture thread (`update()`); `exclude(window:)` may be called
/// from any thread.
package final class ScreenCapture: FrameSource, @unchecked Sendable {
    /// The picture's size: the screen's (or region's) at the start, even; a capture that
    /// `followsScreenSize` takes the screen's new size after a RandR change (capture thread).
    package private(set) var outputWidth: Int
    package private(set) var outputHeight: Int
    /// The picture, up to date after each `update()` that returned true. A new picture, of the new
    /// size, after the screen's size changed when the capture `followsScreenSize`.
    package private(set) var current: VideoFrame
    /// Whether a RandR change changes the picture's size (true) or is scaled into it (false).
    package let followsScreenSize: Bool

    private let x: XConnection
    private let logger: Logger
    /// The captured rectangle in root coordinates.
    private var source: PixelRect
    private let explicitRegion: Bool
    /// The root window's rectangle, kept up to date by RandR events (not asked for every frame).
    private var screenRect: PixelRect
    private var canvas: SharedImage          // BGRX pixels of `source`, what the recording shows
    private var scratch: SharedImage         // damage reads land here first
    private var scaled: UnsafeMutablePointer<UInt8>?  // output-size BGRX after a RandR change
    private let damage: xcb_damage_damage_t
    private let damageRegion: xcb_xfixes_region_t
    private let damageEvent: Int
    private let randrEvent: Int
    private var needsFullRead = true
    /// The screen was damaged while `waitForChange` waited: `update` reads it.
    private var pendingDamage = false

    private var cursorSerial: UInt32 = 0
    private var cursorPixels: [UInt32] = []
    private var cursorSize = (width: 0, height: 0)
    private var cursorHot = (x: 0, y: 0)
    private var cursorPosition = (x: Int.min, y: Int.min)
    private var cursorRect: PixelRect?       // canvas coordinates where it is drawn now
    private var saveUnder: [UInt32] = []

    private let excludedWindows = Mutex<[UInt32]>([])
    private var excludedRects: [PixelRect] = []   // root coordinates
    private var excludedCheckedAt: Int64 = 0
    private var redirected: Set<UInt32> = []
    /// Windows redirected to recompose what lies beneath ours: their damage, and which of their
    /// pixmap's pixels are their own yet (a new pixmap starts as a copy of the screen there, ours
    /// included).
    private var beneathDamage: [xcb_damage_damage_t: xcb_window_t] = [:]
    private var beneathUntrusted: [xcb_window_t: CleanMask] = [:]
    private let beneathRegion: xcb_xfixes_region_t
    private let census: WindowCensus
    private var censusGeneration = -1
    private var protectedAreas: [PixelRect] = []   // root coordinates, up to date while reading

    /// Opens `display` and prepares to capture `region` (root coordinates; nil for the whole screen).
    /// With `followsScreenSize`, the whole screen's pictures take its new size when it changes.
    package init(display: String, region: PixelRect?, followsScreenSize: Bool = false, logger: Logger) throws(CaptureError) {
        let x: XConnection
        do { x = try XConnection(display: display) } catch { throw CaptureError(.unknownDisplay, error.message) }
        let connection = x.connection
        guard ork_xcb_has_shm(connection) != 0 else {
            throw CaptureError(.unsupported, "X display \(display) has no MIT-SHM extension; replayd needs it to read the screen")
        }
        let depth = x.screen.pointee.root_depth
        guard depth == 24 || depth == 32, x.bitsPerPixel(depth: depth) == 32 else {
            throw CaptureError(.unsupported, "X display \(display) has depth \(depth); replayd records 24- and 32-bit displays")
        }
        let screen = x.rootSize()
        let full = PixelRect(x: 0, y: 0, width: screen.width, height: screen.height)
        let wanted = region ?? full
        guard wanted.width >= 2, wanted.height >= 2, full.contains(wanted) else {
            throw CaptureError(.regionOutsideScreen,
                               "the region \(wanted.width)x\(wanted.height)+\(wanted.x)+\(wanted.y) is not inside the screen of \(display) (\(screen.width)x\(screen.height))")
        }
        let damageEvent = Int(ork_xcb_damage_first_event(connection))
        let fixesEvent = Int(ork_xcb_xfixes_first_event(connection))
        guard damageEvent >= 0, fixesEvent >= 0 else {
            throw CaptureError(.unsupported, "X display \(display) lacks DAMAGE or XFIXES, which replayd needs")
        }
        free(xcb_xfixes_query_version_reply(connection, xcb_xfixes_query_version(connection, 4, 0), nil))
        free(xcb_damage_query_version_reply(connection, xcb_damage_query_version(connection, 1, 1), nil))
        let byteCount = wanted.width * wanted.height * 4
        guard let canvas = SharedImage(owner: x, byteCount: byteCount),
              let scratch = SharedImage(owner: x, byteCount: byteCount) else {
            throw CaptureError(.unsupported, "cannot share memory with the X server of \(display) (MIT-SHM attach failed)")
        }
        self.x = x
        self.logger = logger
        self.source = wanted
        self.screenRect = full
        self.explicitRegion = region != nil
        self.followsScreenSize = followsScreenSize
        self.canvas = canvas
        self.scratch = scratch
        self.outputWidth = wanted.width & ~1
        self.outputHeight = wanted.height & ~1
        self.current = VideoFrame(width: wanted.width & ~1, height: wanted.height & ~1)
        self.damageEvent = damageEvent
        self.damage = xcb_generate_id(connection)
        xcb_damage_create(connection, damage, x.root, UInt8(XCB_DAMAGE_REPORT_LEVEL_NON_EMPTY.rawValue))
        self.damageRegion = xcb_generate_id(connection)
        xcb_xfixes_create_region(connection, damageRegion, 0, nil)
        self.beneathRegion = xcb_generate_id(connection)
        xcb_xfixes_create_region(connection, beneathRegion, 0, nil)
        let randr = Int(ork_xcb_randr_first_event(connection))
        self.randrEvent = randr
        self.census = WindowCensus(x: x)
        if randr >= 0 {
            free(xcb_randr_query_version_reply(connection, xcb_randr_query_version(connection, 1, 5), nil))
            xcb_randr_select_input(connection, x.root, UInt16(XCB_RANDR_NOTIFY_MASK_SCREEN_CHANGE.rawValue))
        }
        xcb_flush(connection)
    }

    deinit {
        xcb_damage_destroy(x.connection, damage)
        xcb_xfixes_destroy_region(x.connection, damageRegion)
        xcb_xfixes_destroy_region(x.connection, beneathRegion)
        for id in beneathDamage.keys { xcb_damage_destroy(x.connection, id) }
        xcb_flush(x.connection)
        scaled?.deallocate()
    }

    /// Leaves `window` out of every frame from now on.
    package func exclude(window: UInt32) {
        excludedWindows.withLock { $0.append(window) }
    }

    /// Waits on the X connection: damage to the screen (or a change of the windows) wakes it, so
    /// that a capture without an encoder's frame clock (a broadcast's, whose pictures go to a
    /// frame ring) takes the picture when the screen is drawn instead of up to a frame later.
    package func waitForChange(until deadline: Int64) -> Bool {
        while !x.hasFailed {
            if takeEvents() { pendingDamage = true }
            if pendingDamage || needsFullRead || census.isStale { return true }
            guard x.waitForInput(until: deadline) else { return false }
        }
        return false
    }

    /// Handles the events that arrived: damage, screen changes, the census's window events. True
    /// when something on the screen (not one of the census's redirected windows) was damaged.
    private func takeEvents() -> Bool {
        var damaged = false
        while let event = xcb_poll_for_event(x.connection) {
            let type = Int(event.pointee.response_type & 0x7f)
            if type == damageEvent + Int(XCB_DAMAGE_NOTIFY) {
                if !windowDamaged(event) { damaged = true }
            } else if randrEvent >= 0, type == randrEvent + Int(XCB_RANDR_SCREEN_CHANGE_NOTIFY) {
                screenChanged()
            } else {
                census.note(event)
            }
            free(event)
        }
        return damaged
    }

    /// Brings `current` up to date, and its `changedFraction` (0 when nothing changed). Returns
    /// false when nothing visible changed (no work was done). What changed is added to
    /// `current.changedBlocks`, which the caller empties when it hands the picture to the encoder.
    package func update() throws(CaptureError) -> Bool {
        current.changedFraction = 0
        let connection = x.connection
        guard !x.hasFailed else { throw CaptureError(.lost, "the connection to X display \(x.displayName) was lost: \(x.failure)") }
        var damaged = takeEvents() || pendingDamage
        pendingDamage = false
        let cursorMoved = refreshCursor()
        if !needsFullRead && !damaged && !census.isStale && !cursorMoved { return false }
        // From here to the last read the windows cannot change: what is left out and blanked is
        // where those windows are while the pixels are read.
        xcb_grab_server(connection)
        defer {
            xcb_ungrab_server(connection)
            xcb_flush(connection)
        }
        free(xcb_get_input_focus_reply(connection, xcb_get_input_focus(connection), nil))
        if takeEvents() { damaged = true }
        if census.isStale { census.refresh() }
        if census.generation != censusGeneration {
            let before = protectedAreas
            censusGeneration = census.generation
            protectedAreas = Self.blankedAreas(census.windows)
            // A window became protected or stopped being, or one moved over or off one (which need
            // not damage anything): read everything again.
            if before != protectedAreas { needsFullRead = true }
        }
        var reads: [PixelRect] = []
        var pieces: [PixelRect] = []
        if needsFullRead {
            reads = [canvasBounds]
            if damaged { _ = takeDamage() }
        } else if damaged {
            let damage = takeDamage()
            let local = { (rect: PixelRect) in rect.offsetBy(dx: -self.source.x, dy: -self.source.y).intersection(self.canvasBounds) }
            reads = damage.reads.map(local).filter { !$0.isEmpty }
            pieces = damage.pieces.map(local).filter { !$0.isEmpty }
        }
        if reads.isEmpty && !cursorMoved { return false }

        // What the canvas shows differently from the last picture, in canvas coordinates.
        var dirty: [PixelRect] = []
        let previousCursor = cursorRect
        if let old = previousCursor {
            restoreUnderCursor(old)
            cursorRect = nil
        }
        if !reads.isEmpty {
            dirty = readScreen(reads, pieces: pieces, force: needsFullRead)
            needsFullRead = false
        }
        if dirty.isEmpty && !cursorMoved {
            // Damage without a change (a client repainted the same pixels, or only our own windows
            // changed): the picture stands.
            _ = drawCursor()
            return false
        }
        if let old = previousCursor { dirty.append(old) }
        if let drawn = drawCursor() { dirty.append(drawn) }
        convert(dirty)
        current.changedFraction = min(1, Double(dirty.reduce(0) { $0 + $1.area }) / Double(max(1, canvasBounds.area)))
        return true
    }

    private var canvasBounds: PixelRect { PixelRect(x: 0, y: 0, width: source.width, height: source.height) }
    private var canvasPixels: UnsafeMutablePointer<UInt32> { canvas.address.assumingMemoryBound(to: UInt32.self) }
    private var canvasPlane: PixelPlane { PixelPlane(pixels: canvasPixels, stride: source.width, origin: canvasBounds) }

    /// Takes the accumulated damage from the server, in root coordinates: what to read (its
    /// rectangles, which do not overlap, or their bounding box when one read is cheaper) and, when
    /// the box stands for several rectangles, those rectangles (`pieces`): only they changed.
    private func takeDamage() -> (reads: [PixelRect], pieces: [PixelRect]) {
        let connection = x.connection
        xcb_damage_subtract(connection, damage, 0, damageRegion)
        guard let reply = xcb_xfixes_fetch_region_reply(connection, xcb_xfixes_fetch_region(connection, damageRegion), nil) else { return ([], []) }
        defer { free(reply) }
        let e = reply.pointee.extents
        let bounds = PixelRect(x: Int(e.x), y: Int(e.y), width: Int(e.width), height: Int(e.height))
        guard !bounds.isEmpty else { return ([], []) }
        let count = Int(xcb_xfixes_fetch_region_rectangles_length(reply))
        guard count > 1, count <= Self.maximumPieces, let first = xcb_xfixes_fetch_region_rectangles(reply) else { return ([bounds], []) }
        let rectangles = UnsafeBufferPointer(start: first, count: count).map {
            PixelRect(x: Int($0.x), y: Int($0.y), width: Int($0.width), height: Int($0.height))
        }
        // Many small pieces close together cost more round trips than pixels: read the box instead.
        let area = rectangles.reduce(0) { $0 + $1.area }
        return count > Self.maximumReads || area * 2 > bounds.area ? ([bounds], rectangles) : (rectangles, [])
    }

    /// At most this many separate reads per frame.
    private static let maximumReads = 16
    /// A box read for more pieces than this counts as changed whole.
    private static let maximumPieces = 256

    /// Reads `rects` (canvas coordinates, not overlapping) from the screen, recomposes what lies
    /// beneath the excluded windows in what was read, and brings the canvas up to date. Returns the
    /// parts whose pixels changed: a client that repaints part of the screen with the same pixels
    /// (a spinner's background, a clock redrawn with the same time, a toolkit redrawing a widget)
    /// damages the screen but changes nothing, and such a frame is neither converted nor encoded.
    /// All of `rects` count as changed when `force`, or when they cover half the screen or more: a
    /// client repainting that much every frame (a video, a game) changes it at about our rate, and
    /// a read that comes out the same is its frame clock beating against ours; a repeat keeps such
    /// a recording at its constant rate. Of a box read for several pieces of damage (`pieces`,
    /// canvas coordinates), only the pieces count (within its changed rows when compared).
    private func readScreen(_ rects: [PixelRect], pieces: [PixelRect], force: Bool) -> [PixelRect] {
        let connection = x.connection
        let scratchPixels = scratch.address.assumingMemoryBound(to: UInt32.self)
        let excluded = excludedRectangles()
        if rects == [canvasBounds], screenRect.contains(source) {
            // The whole picture, straight into the canvas: no copy (and, being all of it, no comparison).
            if !canvas.read(x.root, source) { logger.debug("screen read failed") }
            recompose(excluded, in: canvasPlane)
            blankProtected(in: canvasPlane)
            return pieces.isEmpty ? rects : pieces
        }
        let compare = !force && rects.reduce(0) { $0 + $1.area } * 2 < canvasBounds.area
        var changed: [PixelRect] = []
        var pending: [(xcb_shm_get_image_cookie_t, PixelRect, Int)] = []
        var offset = 0
        for rect in rects {
            let rootRect = rect.offsetBy(dx: source.x, dy: source.y)
            let visible = rootRect.intersection(screenRect)
            if visible != rootRect {
                canvasPlane.fill(rect, with: 0)
                changed.append(rect)
            }
            guard !visible.isEmpty, offset + visible.area * 4 <= scratch.byteCount else { continue }
            let cookie = xcb_shm_get_image(connection, x.root, Int16(visible.x), Int16(visible.y), UInt16(visible.width), UInt16(visible.height),
                                           ~0, UInt8(XCB_IMAGE_FORMAT_Z_PIXMAP.rawValue), scratch.segment, UInt32(offset))
            pending.append((cookie, visible.offsetBy(dx: -source.x, dy: -source.y), offset))
            offset += visible.area * 4
        }
        for (cookie, local, offset) in pending {
            var error: UnsafeMutablePointer<xcb_generic_error_t>?
            let reply = xcb_shm_get_image_reply(connection, cookie, &error)
            free(error)
            guard let reply else { continue }
            free(reply)
            let fresh = PixelPlane(pixels: scratchPixels + offset / 4, stride: local.width, origin: local)
            recompose(excluded, in: fresh)
            blankProtected(in: fresh)
            let rows = compare ? changedRows(of: fresh, against: canvasPixels) : 0..<local.height
            guard !rows.isEmpty else { continue }
            let band = PixelRect(x: local.x, y: local.y + rows.lowerBound, width: local.width, height: rows.count)
            // Of a box read for several pieces of damage only the pieces changed (the server says
            // nothing else did): only they are copied, converted and handed to libx264 as changed.
            // Where a terminal scrolls and a spinner turns, the box is half the screen and the pieces a third.
            let parts = pieces.isEmpty ? [band] : pieces.map { $0.intersection(band) }.filter { !$0.isEmpty }
            for part in parts {
                canvasPlane.copy(from: fresh.pixels + (part.y - local.y) * fresh.stride + (part.x - local.x), stride: fresh.stride, into: part)
                changed.append(part)
            }
        }
        return changed
    }

    /// The rows of `fresh` (relative to its origin) from the first to the last that differ from the
    /// same place in `canvas`; empty when none do.
    private func changedRows(of fresh: PixelPlane, against canvas: UnsafeMutablePointer<UInt32>) -> Range<Int> {
        let area = fresh.origin
        func differs(_ row: Int) -> Bool {
            memcmp(canvas + (area.y + row) * source.width + area.x, fresh.pixels + row * fresh.stride, area.width * 4) != 0
        }
        guard let first = (0..<area.height).first(where: differs) else { return 0..<0 }
        let last = (first..<area.height).reversed().first(where: differs) ?? first
        return first..<(last + 1)
    }


    // MARK: Cursor

    /// Asks XFixes where the cursor is and, when it changed shape, what it looks like.
    private func refreshCursor() -> Bool {
        let connection = x.connection
        guard let reply = xcb_xfixes_get_cursor_image_reply(connection, xcb_xfixes_get_cursor_image(connection), nil) else { return false }
        defer { free(reply) }
        let c = reply.pointee
        let position = (x: Int(c.x) - Int(c.xhot) - source.x, y: Int(c.y) - Int(c.yhot) - source.y)
        let moved = position != cursorPosition || c.cursor_serial != cursorSerial
        if c.cursor_serial != cursorSerial || cursorPixels.count != Int(c.width) * Int(c.height) {
            let count = Int(c.width) * Int(c.height)
            let image = xcb_xfixes_get_cursor_image_cursor_image(reply)!
            cursorPixels = Array(UnsafeBufferPointer(start: image, count: count))
            cursorSize = (Int(c.width), Int(c.height))
            cursorHot = (Int(c.xhot), Int(c.yhot))
            cursorSerial = c.cursor_serial
        }
        cursorPosition = position
        return moved
    }

    private func restoreUnderCursor(_ rect: PixelRect) {
        saveUnder.withUnsafeBufferPointer { saved in
            canvasPlane.copy(from: saved.baseAddress!, stride: rect.width, into: rect)
        }
    }

    /// Blends the cursor (premultiplied ARGB) into the canvas; returns where.
    private func drawCursor() -> PixelRect? {
        let full = PixelRect(x: cursorPosition.x, y: cursorPosition.y, width: cursorSize.width, height: cursorSize.height)
        let rect = full.intersection(canvasBounds)
        guard !rect.isEmpty else { return nil }
        let target = canvasPixels
        saveUnder.removeAll(keepingCapacity: true)
        for row in rect.y..<rect.maxY {
            saveUnder.append(contentsOf: UnsafeBufferPointer(start: target + row * source.width + rect.x, count: rect.width))
        }
        for row in rect.y..<rect.maxY {
            let line = target + row * source.width
            let cursorRow = (row - full.y) * cursorSize.width - full.x
            for column in rect.x..<rect.maxX {
                let s = cursorPixels[cursorRow + column]
                let alpha = s >> 24
                if alpha == 0 { continue }
                if alpha == 255 { line[column] = s; continue }
                let d = line[column]
                let inverse = 255 - alpha
                let r = (s >> 16 & 0xff) + ((d >> 16 & 0xff) * inverse) / 255
                let g = (s >> 8 & 0xff) + ((d >> 8 & 0xff) * inverse) / 255
                let b = (s & 0xff) + ((d & 0xff) * inverse) / 255
                line[column] = 0xff00_0000 | min(r, 255) << 16 | min(g, 255) << 8 | min(b, 255)
            }
        }
        cursorRect = rect
        return rect
    }

    // MARK: Excluded windows

    /// Where the excluded windows are (root coordinates), looked up at most once a second. Their
    /// geometry counts even before they are mapped: the first frame must not catch the indicator
    /// appearing.
    private func excludedRectangles() -> [PixelRect] {
        let ours = census.windows.filter(\.isSystemUI).map(\.outer)
        let windows = excludedWindows.withLock { $0 }
        guard !windows.isEmpty else { return ours }
        let now = MonotonicClock.now()
        if now - excludedCheckedAt > 1_000_000_000 || excludedRects.count != windows.count {
            excludedRects = windows.compactMap { x.rootRectangle(of: $0) }
            excludedCheckedAt = now
        }
        return ours + excludedRects.filter { !ours.contains($0) }
    }

    /// Where protected windows show (root coordinates): each one's shape, less what windows above
    /// it cover (opaque ones: a 32-bit window may be see-through). OpenReplayKit's own windows above
    /// one do not count: what lies beneath them is recomposed, and so blanked too.
    static func blankedAreas(_ windows: [TopLevelWindow]) -> [PixelRect] {
        var areas: [PixelRect] = []
        for (index, window) in windows.enumerated() {
            // A protected window stays blank when reparented into another one.
            var pieces = (window.isProtected ? window.shape : []) + window.inner.filter(\.isProtected).map(\.rect)
            if pieces.isEmpty { continue }
            for above in windows[(index + 1)...] where !above.isSystemUI && above.clientDepth != 32 {
                pieces = pieces.flatMap { $0.subtracting(above.outer) }
            }
            areas += pieces
        }
        return areas
    }

    /// Paints the protected windows' areas in `plane` opaque black.
    private func blankProtected(in plane: PixelPlane) {
        for area in protectedAreas {
            let local = area.offsetBy(dx: -source.x, dy: -source.y).intersection(plane.origin)
            if !local.isEmpty { plane.fill(local, with: 0xff00_0000) }
        }
    }

    /// Redirects (Composite) the windows beneath the excluded ones before the first frame: a window's
    /// pixmap is empty until its client repaints, so this must happen a moment before time zero.
    package func prime() {
        census.refresh()
        for excluded in excludedRectangles() {
            _ = windowsBeneath(excluded.intersection(source))
        }
        xcb_flush(x.connection)
    }

    /// The viewable top-level windows other than the excluded ones that overlap `rootArea`, bottom to
    /// top, with their outer rectangles; each is redirected (automatically: the screen does not change)
    /// so that its pixmap holds its pixels even where something covers it.
    private func windowsBeneath(_ rootArea: PixelRect) -> [(window: xcb_window_t, outer: PixelRect)] {
        let connection = x.connection
        guard !rootArea.isEmpty else { return [] }
        let excluded = Set(excludedWindows.withLock { $0 } + census.windows.filter(\.isSystemUI).map(\.frame))
        guard let tree = xcb_query_tree_reply(connection, xcb_query_tree(connection, x.root), nil) else { return [] }
        defer { free(tree) }
        let children = UnsafeBufferPointer(start: xcb_query_tree_children(tree), count: Int(xcb_query_tree_children_length(tree)))
        var found: [(window: xcb_window_t, outer: PixelRect)] = []
        for window in children where !excluded.contains(window) {
            guard let attributes = xcb_get_window_attributes_reply(connection, xcb_get_window_attributes(connection, window), nil) else { continue }
            let viewable = attributes.pointee.map_state == UInt8(XCB_MAP_STATE_VIEWABLE.rawValue)
                && attributes.pointee._class != UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue)
            free(attributes)
            guard viewable,
                  let geometry = xcb_get_geometry_reply(connection, xcb_get_geometry(connection, window), nil) else { continue }
            let border = Int(geometry.pointee.border_width)
            let depth = geometry.pointee.depth
            let outer = PixelRect(x: Int(geometry.pointee.x), y: Int(geometry.pointee.y),
                                  width: Int(geometry.pointee.width) + 2 * border, height: Int(geometry.pointee.height) + 2 * border)
            free(geometry)
            guard !rootArea.intersection(outer).isEmpty, depth == 24 || depth == 32 else { continue }
            if !redirected.contains(window) {
                xcb_composite_redirect_window(connection, window, UInt8(XCB_COMPOSITE_REDIRECT_AUTOMATIC.rawValue))
                redirected.insert(window)
                let damage = xcb_generate_id(connection)
                xcb_damage_create(connection, damage, window, UInt8(XCB_DAMAGE_REPORT_LEVEL_NON_EMPTY.rawValue))
                beneathDamage[damage] = window
                beneathUntrusted[window] = CleanMask(width: outer.width, height: outer.height)
                census.askToRedraw(window, width: outer.width, height: outer.height)
                if let client = census.windows.first(where: { $0.frame == window && $0.client != window }) {
                    census.askToRedraw(client.client, width: client.clientRect.width, height: client.clientRect.height)
                }
            }
            found.append((window, outer))
        }
        return found
    }

    /// A DamageNotify for a window redirected to recompose beneath ours: what it drew is its own.
    /// Returns false for the root's damage.
    private func windowDamaged(_ event: UnsafeMutablePointer<xcb_generic_event_t>) -> Bool {
        let id = UnsafeMutableRawPointer(event).assumingMemoryBound(to: xcb_damage_notify_event_t.self).pointee.damage
        guard id != damage, let window = beneathDamage[id] else { return false }
        let connection = x.connection
        guard var mask = beneathUntrusted[window] else {
            xcb_damage_subtract(connection, id, 0, 0)
            return true
        }
        xcb_damage_subtract(connection, id, 0, beneathRegion)
        if let reply = xcb_xfixes_fetch_region_reply(connection, xcb_xfixes_fetch_region(connection, beneathRegion), nil) {
            let count = Int(xcb_xfixes_fetch_region_rectangles_length(reply))
            if count > 0, let first = xcb_xfixes_fetch_region_rectangles(reply) {
                for rect in UnsafeBufferPointer(start: first, count: count) {
                    mask.mark(PixelRect(x: Int(rect.x), y: Int(rect.y), width: Int(rect.width), height: Int(rect.height)))
                }
            }
            free(reply)
        }
        if mask.isAllClean {
            // All its own now: recompose what lies beneath ours with it.
            beneathUntrusted[window] = nil
            needsFullRead = true
        } else {
            beneathUntrusted[window] = mask
        }
        return true
    }

    /// Repaints the parts of `plane` under `excluded` (root coordinates) from the windows beneath.
    private func recompose(_ excluded: [PixelRect], in plane: PixelPlane) {
        for excluded in excluded {
            let area = excluded.offsetBy(dx: -source.x, dy: -source.y).intersection(plane.origin)
            if !area.isEmpty { recomposeBeneath(area, in: plane) }
        }
    }

    /// Repaints `area` (canvas coordinates, inside `plane`) from the windows beneath the excluded
    /// ones, bottom to top, reading each window's Composite pixmap (which holds its pixels even
    /// where covered).
    private func recomposeBeneath(_ area: PixelRect, in plane: PixelPlane) {
        let connection = x.connection
        plane.fill(area, with: 0xff00_0000)
        let rootArea = area.offsetBy(dx: source.x, dy: source.y)
        for (window, outer) in windowsBeneath(rootArea) {
            let part = rootArea.intersection(outer)
            let pixmap = xcb_generate_id(connection)
            xcb_composite_name_window_pixmap(connection, window, pixmap)
            let cookie = xcb_get_image(connection, UInt8(XCB_IMAGE_FORMAT_Z_PIXMAP.rawValue), pixmap,
                                       Int16(part.x - outer.x), Int16(part.y - outer.y), UInt16(part.width), UInt16(part.height), ~0)
            let image = xcb_get_image_reply(connection, cookie, nil)
            xcb_free_pixmap(connection, pixmap)
            guard let image else { continue }
            defer { free(image) }
            guard Int(xcb_get_image_data_length(image)) >= part.area * 4, let data = xcb_get_image_data(image) else { continue }
            let pixels = UnsafeRawPointer(data).assumingMemoryBound(to: UInt32.self)
            let local = part.offsetBy(dx: -source.x, dy: -source.y)
            if let mask = beneathUntrusted[window] {
                // Only what the window has drawn since it was redirected; black elsewhere.
                plane.fill(local, with: 0xff00_0000)
                let dx = part.x - outer.x, dy = part.y - outer.y
                for row in 0..<part.height {
                    for column in 0..<part.width where mask.isClean(x: dx + column, y: dy + row) {
                        plane.set(x: local.x + column, y: local.y + row, to: pixels[row * part.width + column])
                    }
                }
            } else {
                plane.copy(from: pixels, stride: part.width, into: local)
            }
        }
    }

    // MARK: Size changes (RandR)

    private func screenChanged() {
        let screen = x.rootSize()
        let full = PixelRect(x: 0, y: 0, width: screen.width, height: screen.height)
        screenRect = full
        needsFullRead = true
        cursorRect = nil
        guard !explicitRegion, full.width != source.width || full.height != source.height else { return }
        guard let newCanvas = SharedImage(owner: x, byteCount: full.area * 4),
              let newScratch = SharedImage(owner: x, byteCount: full.area * 4) else {
            logger.error("the screen changed to \(full.width)x\(full.height) and its memory could not be shared; the recording keeps the old area")
            return
        }
        canvas = newCanvas
        scratch = newScratch
        source = full
        if followsScreenSize {
            logger.notice("the screen changed to \(full.width)x\(full.height); the pictures follow (they were \(outputWidth)x\(outputHeight))")
            outputWidth = full.width & ~1
            outputHeight = full.height & ~1
            current = VideoFrame(width: outputWidth, height: outputHeight)
            current.changedBlocks.markAll()
            scaled?.deallocate()
            scaled = nil
            return
        }
        logger.notice("the screen changed to \(full.width)x\(full.height); the recording stays \(outputWidth)x\(outputHeight), the screen scaled to fit")
        if scaled == nil {
            scaled = UnsafeMutablePointer<UInt8>.allocate(capacity: outputWidth * outputHeight * 4)
        }
    }

    // MARK: Conversion

    /// Converts the parts of the canvas in `areas` (canvas coordinates; they may overlap) into
    /// `current`. After a RandR change the whole screen is scaled to fit instead.
    private func convert(_ areas: [PixelRect]) {
        guard !areas.isEmpty else { return }
        let bytes = UnsafePointer(canvas.address.assumingMemoryBound(to: UInt8.self))
        guard source.width != outputWidth && source.width != outputWidth + 1 || source.height != outputHeight && source.height != outputHeight + 1,
              let scaled else {
            for area in areas {
                current.convert(fromBGRA: bytes, stride: source.width * 4, columns: area.x..<area.maxX, rows: area.y..<area.maxY)
                // As converted: widened to even edges (the chroma of two pixels).
                current.changedBlocks.mark(x: (area.x & ~1)..<((area.maxX + 1) & ~1), y: (area.y & ~1)..<((area.maxY + 1) & ~1))
            }
            return
        }
        current.changedBlocks.markAll()
        // Letterbox: keep the aspect ratio, centre, black around.
        let scale = min(Double(outputWidth) / Double(source.width), Double(outputHeight) / Double(source.height))
        let w = max(2, Int(Double(source.width) * scale) & ~1), h = max(2, Int(Double(source.height) * scale) & ~1)
        let ox = (outputWidth - w) / 2, oy = (outputHeight - h) / 2
        let stride = outputWidth * 4
        UnsafeMutableRawPointer(scaled).initializeMemory(as: UInt32.self, repeating: 0xff00_0000, count: outputWidth * outputHeight)
        _ = ARGBScale(bytes, Int32(source.width * 4), Int32(source.width), Int32(source.height),
                      scaled + oy * stride + ox * 4, Int32(stride), Int32(w), Int32(h), kFilterBilinear)
        current.convert(fromBGRA: scaled, stride: stride, rows: 0..<outputHeight)
    }
}

/// Pixels of the canvas area `origin` (canvas coordinates) laid out with `stride` pixels a row:
/// the canvas itself, or a piece just read into the scratch segment.
struct PixelPlane {
    let pixels: UnsafeMutablePointer<UInt32>
    let stride: Int
    let origin: PixelRect

    private func row(_ y: Int, at x: Int) -> UnsafeMutablePointer<UInt32> {
        pixels + (y - origin.y) * stride + (x - origin.x)
    }

    /// Copies rows of `rect.width` pixels, `stride` apart, into `rect` (canvas coordinates).
    func copy(from source: UnsafePointer<UInt32>, stride sourceStride: Int, into rect: PixelRect) {
        for line in 0..<rect.height {
            row(rect.y + line, at: rect.x).update(from: source + line * sourceStride, count: rect.width)
        }
    }

    func set(x: Int, y: Int, to value: UInt32) {
        row(y, at: x).pointee = value
    }

    func fill(_ rect: PixelRect, with value: UInt32) {
        for y in rect.y..<rect.maxY {
            row(y, at: rect.x).update(repeating: value, count: rect.width)
        }
    }
}

/// Why the screen cannot be captured.
package struct CaptureError: Error, Sendable, CustomStringConvertible {
    package enum Kind: Sendable {
        case unknownDisplay, regionOutsideScreen, unsupported, lost
        /// The person declined in the desktop's own dialog (Wayland's screen-cast portal).
        case declined
    }
    package var kind: Kind
    package var message: String
    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    package var description: String { message }
}
