import CXCB
#if canImport(Glibc)
import Glibc
#endif

enum ContentMode: Equatable {
    /// Colour bars, counter, moving square and the once-a-second flash; the whole window is redrawn
    /// (and so damaged) every frame: full motion for a screen recorder.
    case bars
    /// The bars frame drawn once; nothing changes afterwards.
    case still
    /// A still background, a terminal scrolling text lines and a small animated square; only what
    /// changes is redrawn.
    case desktop
    /// The desktop's still background with one 320x180 moving pattern (a video playing in a
    /// corner): only that area changes, every frame.
    case smallAnimation
    /// Every pixel changes every frame: 30-pixel tiles whose colours move as diagonal waves (the
    /// full-motion benchmark: what a game or a video looks like to an encoder).
    case fullMotion
    /// The wall clock drawn into every frame, for glass-to-glass latency: the layout of
    /// `Benchmarks/service/barcode.py`, scaled to the screen (`ClockBarcode`).
    case clockBarcode
}

struct RendererError: Error, CustomStringConvertible {
    var description: String
}

/// One full-screen window and its back buffer. Everything is drawn into a pixmap and copied to the
/// window, so that nobody ever sees a half-drawn frame. Used from one thread only.
final class Renderer {
    let displayName: String
    let width: Int
    let height: Int
    let window: UInt32
    private let connection: OpaquePointer
    private let pixmap: UInt32
    private let gc: UInt32
    private let layout: Layout
    private let mode: ContentMode
    private let pixelOf: (Layout.RGB) -> UInt32
    private var currentForeground: UInt32 = .max
    private var desktop: DesktopScene?

    init(displayName requested: String?, mode: ContentMode) throws {
        let name = requested ?? getenv("DISPLAY").map { String(cString: $0) }
        guard let name, !name.isEmpty else {
            throw RendererError(description: "no X display: set DISPLAY or pass --display")
        }
        var screenNumber: Int32 = 0
        guard let connection = xcb_connect(name, &screenNumber), xcb_connection_has_error(connection) == 0 else {
            throw RendererError(description: "cannot connect to the X display \(name)")
        }
        var iterator = xcb_setup_roots_iterator(xcb_get_setup(connection))
        for _ in 0..<screenNumber { xcb_screen_next(&iterator) }
        guard let screen = iterator.data?.pointee else {
            xcb_disconnect(connection)
            throw RendererError(description: "the X display \(name) has no screen \(screenNumber)")
        }
        let masks = Self.visualMasks(screen: iterator.data!, visual: screen.root_visual)
        self.pixelOf = { colour in
            func scale(_ value: UInt8, _ mask: UInt32) -> UInt32 {
                guard mask != 0 else { return 0 }
                let shift = UInt32(mask.trailingZeroBitCount)
                let maximum = mask >> shift
                return ((UInt32(value) * maximum + 127) / 255) << shift
            }
            return scale(colour.r, masks.red) | scale(colour.g, masks.green) | scale(colour.b, masks.blue)
        }
        self.displayName = name
        self.connection = connection
        self.width = Int(screen.width_in_pixels)
        self.height = Int(screen.height_in_pixels)
        self.layout = Layout(width: width, height: height)
        self.mode = mode

        window = xcb_generate_id(connection)
        let windowValues: [UInt32] = [screen.black_pixel, 1, XCB_EVENT_MASK_EXPOSURE.rawValue]
        xcb_create_window(connection, screen.root_depth, window, screen.root, 0, 0,
                          UInt16(width), UInt16(height), 0, UInt16(XCB_WINDOW_CLASS_INPUT_OUTPUT.rawValue),
                          screen.root_visual,
                          XCB_CW_BACK_PIXEL.rawValue | XCB_CW_OVERRIDE_REDIRECT.rawValue | XCB_CW_EVENT_MASK.rawValue,
                          windowValues)
        let title = Array("replay-testcontent".utf8)
        xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, XCB_ATOM_WM_NAME.rawValue,
                            XCB_ATOM_STRING.rawValue, 8, UInt32(title.count), title)
        let wmClass = Array("replay-testcontent\0ReplayTestContent\0".utf8)
        xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, XCB_ATOM_WM_CLASS.rawValue,
                            XCB_ATOM_STRING.rawValue, 8, UInt32(wmClass.count), wmClass)
        if let pidAtom = Self.internAtom(connection, "_NET_WM_PID") {
            var pid = UInt32(getpid())
            xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, pidAtom,
                                XCB_ATOM_CARDINAL.rawValue, 32, 1, &pid)
        }

        pixmap = xcb_generate_id(connection)
        xcb_create_pixmap(connection, screen.root_depth, pixmap, window, UInt16(width), UInt16(height))
        gc = xcb_generate_id(connection)
        let gcValues: [UInt32] = [screen.black_pixel, 0]
        xcb_create_gc(connection, gc, pixmap, XCB_GC_FOREGROUND.rawValue | XCB_GC_GRAPHICS_EXPOSURES.rawValue, gcValues)

        xcb_map_window(connection, window)
        let stackValues: [UInt32] = [XCB_STACK_MODE_ABOVE.rawValue]
        xcb_configure_window(connection, window, UInt16(XCB_CONFIG_WINDOW_STACK_MODE.rawValue), stackValues)
        xcb_flush(connection)
        if mode == .desktop || mode == .smallAnimation { desktop = DesktopScene(layout: layout) }
    }

    deinit {
        xcb_free_gc(connection, gc)
        xcb_free_pixmap(connection, pixmap)
        xcb_destroy_window(connection, window)
        xcb_flush(connection)
        xcb_disconnect(connection)
    }

    var isConnected: Bool { xcb_connection_has_error(connection) == 0 }

    /// Answers Expose events by copying the back buffer again.
    func handleEvents() {
        while let event = xcb_poll_for_event(connection) {
            if event.pointee.response_type & 0x7f == XCB_EXPOSE {
                let expose = UnsafeMutableRawPointer(event).assumingMemoryBound(to: xcb_expose_event_t.self).pointee
                xcb_copy_area(connection, pixmap, window, gc, Int16(expose.x), Int16(expose.y),
                              Int16(expose.x), Int16(expose.y), expose.width, expose.height)
            }
            free(event)
        }
        xcb_flush(connection)
    }

    /// Draws frame `n` and shows it.
    func drawFrame(number n: Int, framesPerSecond fps: Int) {
        switch mode {
        case .bars, .still:
            if Layout.isFlash(frame: n, framesPerSecond: fps) && mode == .bars {
                fill([Layout.Rect(x: 0, y: 0, width: width, height: height)], Layout.white)
            } else {
                drawBarsFrame(n)
            }
            xcb_copy_area(connection, pixmap, window, gc, 0, 0, 0, 0, UInt16(width), UInt16(height))
        case .fullMotion:
            drawFullMotionFrame(n)
            xcb_copy_area(connection, pixmap, window, gc, 0, 0, 0, 0, UInt16(width), UInt16(height))
        case .clockBarcode:
            let barcode = ClockBarcode(width: width, height: height)
            // The background and the bar's track each frame, then the time as late as possible.
            fill([Layout.Rect(x: 0, y: 2 * barcode.band, width: width, height: height - 2 * barcode.band)], ClockBarcode.background)
            fill([barcode.bar(frame: n)], ClockBarcode.barColour)
            let (ones, zeros) = barcode.blocks(stamp: ClockBarcode.wallClockStamp())
            fill(ones, Layout.white)
            fill(zeros, Layout.RGB(r: 0, g: 0, b: 0))
            fill(barcode.margins, ClockBarcode.margin)
            xcb_copy_area(connection, pixmap, window, gc, 0, 0, 0, 0, UInt16(width), UInt16(height))
        case .smallAnimation:
            guard var scene = desktop else { return }
            var dirty = scene.drawBackground(fill: { rects, colour in self.fill(rects, colour) })
            desktop = scene
            let area = scene.movingPatternArea
            drawWaves(n, in: area, tile: 20)
            dirty.append(area)
            for rect in dirty {
                xcb_copy_area(connection, pixmap, window, gc, Int16(rect.x), Int16(rect.y), Int16(rect.x), Int16(rect.y),
                              UInt16(rect.width), UInt16(rect.height))
            }
        case .desktop:
            guard var scene = desktop else { return }
            let dirty = scene.draw(frame: n, fill: { rects, colour in self.fill(rects, colour) },
                                   scroll: { rect, dy in self.scroll(rect, by: dy) })
            desktop = scene
            for rect in dirty {
                xcb_copy_area(connection, pixmap, window, gc, Int16(rect.x), Int16(rect.y), Int16(rect.x), Int16(rect.y),
                              UInt16(rect.width), UInt16(rect.height))
            }
        }
        xcb_flush(connection)
    }

    /// Copies part of the back buffer to the window again, unchanged: the right quarter of the
    /// counter's panel on even frames, the right quarter of the top band of bars (where the
    /// recording indicator is) on odd ones. Both together, and the box around them, stay under half
    /// the screen: the capture compares such reads (a repaint of half the screen or more counts as
    /// a change, as a video's does).
    func repaint(frame n: Int) {
        let left = width * 3 / 4, panel = layout.panel
        let area = n % 2 == 0 ? Layout.Rect(x: left, y: panel.y, width: width - left, height: panel.height)
                              : Layout.Rect(x: left, y: 0, width: width - left, height: layout.topBandBottom)
        xcb_copy_area(connection, pixmap, window, gc, Int16(area.x), Int16(area.y), Int16(area.x), Int16(area.y),
                      UInt16(area.width), UInt16(area.height))
        xcb_flush(connection)
    }

    private func drawBarsFrame(_ n: Int) {
        for (index, colour) in Layout.barColours.enumerated() {
            let x0 = layout.barX(index), x1 = layout.barX(index + 1)
            fill([Layout.Rect(x: x0, y: layout.topBandBottom, width: x1 - x0, height: layout.barsBottom - layout.topBandBottom)], colour)
            fill([Layout.Rect(x: width - x1, y: 0, width: x1 - x0, height: layout.topBandBottom)], colour)
        }
        fill([layout.panel], Layout.panelColour)
        var digits: [Layout.Rect] = []
        var value = n
        for position in stride(from: Layout.digitCount - 1, through: 0, by: -1) {
            let x = layout.counterOrigin.x + position * (layout.digitWidth + layout.digitSpacing)
            digits += layout.segments(of: value % 10, x: x, y: layout.counterOrigin.y)
            value /= 10
        }
        fill(digits, Layout.digitColour)
        fill([layout.square(frame: n)], Layout.squareColour)
    }

    private func drawFullMotionFrame(_ n: Int) {
        drawWaves(n, in: Layout.Rect(x: 0, y: 0, width: width, height: height), tile: 30)
        fill([layout.square(frame: n)], Layout.squareColour)
    }

    /// Tiles of `area` whose colours move as diagonal waves: every pixel changes every frame.
    private func drawWaves(_ n: Int, in area: Layout.Rect, tile: Int) {
        let levels = 24
        var buckets = Array(repeating: [Layout.Rect](), count: levels * levels)
        for row in 0..<((area.height + tile - 1) / tile) {
            for column in 0..<((area.width + tile - 1) / tile) {
                let a = (column * 3 + row * 2 + n * 2) % (2 * levels)
                let b = (column - row * 3 + n * 5 + 4 * levels) % (2 * levels)
                let i = a < levels ? a : 2 * levels - 1 - a
                let j = b < levels ? b : 2 * levels - 1 - b
                buckets[i * levels + j].append(Layout.Rect(x: area.x + column * tile, y: area.y + row * tile,
                                                           width: min(tile, area.width - column * tile),
                                                           height: min(tile, area.height - row * tile)))
            }
        }
        for (index, rects) in buckets.enumerated() where !rects.isEmpty {
            let i = index / levels, j = index % levels
            let colour = Layout.RGB(r: UInt8(i * 255 / (levels - 1)), g: UInt8(j * 255 / (levels - 1)), b: UInt8((i + j) * 255 / (2 * levels - 2)))
            fill(rects, colour)
        }
    }

    private func fill(_ rects: [Layout.Rect], _ colour: Layout.RGB) {
        guard !rects.isEmpty else { return }
        let pixel = pixelOf(colour)
        if pixel != currentForeground {
            let values: [UInt32] = [pixel]
            xcb_change_gc(connection, gc, XCB_GC_FOREGROUND.rawValue, values)
            currentForeground = pixel
        }
        let xcbRects = rects.map {
            xcb_rectangle_t(x: Int16(clamping: $0.x), y: Int16(clamping: $0.y),
                            width: UInt16(clamping: $0.width), height: UInt16(clamping: $0.height))
        }
        xcb_poly_fill_rectangle(connection, pixmap, gc, UInt32(xcbRects.count), xcbRects)
    }

    /// Moves the contents of `rect` in the back buffer up by `dy` pixels (a terminal scrolling).
    private func scroll(_ rect: Layout.Rect, by dy: Int) {
        xcb_copy_area(connection, pixmap, pixmap, gc, Int16(rect.x), Int16(rect.y + dy), Int16(rect.x), Int16(rect.y),
                      UInt16(rect.width), UInt16(rect.height - dy))
    }

    private static func visualMasks(screen: UnsafeMutablePointer<xcb_screen_t>, visual: xcb_visualid_t)
        -> (red: UInt32, green: UInt32, blue: UInt32)
    {
        var depths = xcb_screen_allowed_depths_iterator(screen)
        while depths.rem > 0 {
            var visuals = xcb_depth_visuals_iterator(depths.data)
            while visuals.rem > 0 {
                if let v = visuals.data?.pointee, v.visual_id == visual {
                    return (v.red_mask, v.green_mask, v.blue_mask)
                }
                xcb_visualtype_next(&visuals)
            }
            xcb_depth_next(&depths)
        }
        return (0xff0000, 0x00ff00, 0x0000ff)
    }

    static func internAtom(_ connection: OpaquePointer, _ name: String) -> xcb_atom_t? {
        let cookie = xcb_intern_atom(connection, 0, UInt16(name.utf8.count), name)
        guard let reply = xcb_intern_atom_reply(connection, cookie, nil) else { return nil }
        defer { free(reply) }
        return reply.pointee.atom
    }
}

/// `--clock-barcode`: the wall clock (milliseconds since 1970, modulo 2^32) as 32 black and white
/// blocks across the top sixth of the screen and the same bits inverted in the next sixth, mid grey
/// below with a moving bar: `Benchmarks/service/barcode.py`'s layout at the screen's size, so that
/// `latency.js` reads it from the viewer's picture whatever the screen's size.
struct ClockBarcode {
    static let bits = 32
    static let background = Layout.RGB(r: 0x60, g: 0x60, b: 0x60)
    static let barColour = Layout.RGB(r: 0xe0, g: 0xe0, b: 0xe0)
    static let margin = Layout.RGB(r: 0x80, g: 0x80, b: 0x80)
    let width: Int
    let height: Int
    /// Rows per band (barcode.py: 60 of 360).
    var band: Int { height / 6 }
    var block: Int { width / Self.bits }

    static func wallClockStamp() -> UInt32 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt32(truncatingIfNeeded: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }

    /// The white and the black blocks of both bands for `stamp`.
    func blocks(stamp: UInt32) -> (ones: [Layout.Rect], zeros: [Layout.Rect]) {
        var ones: [Layout.Rect] = [], zeros: [Layout.Rect] = []
        for i in 0..<Self.bits {
            let bit = (stamp >> UInt32(Self.bits - 1 - i)) & 1 == 1
            let top = Layout.Rect(x: i * block, y: 0, width: block, height: band)
            let bottom = Layout.Rect(x: i * block, y: band, width: block, height: band)
            if bit { ones.append(top); zeros.append(bottom) } else { zeros.append(top); ones.append(bottom) }
        }
        return (ones, zeros)
    }

    /// What is right of the 32 blocks when the width is not a multiple of 32.
    var margins: [Layout.Rect] {
        let used = block * Self.bits
        return used < width ? [Layout.Rect(x: used, y: 0, width: width - used, height: 2 * band)] : []
    }

    /// barcode.py's bar: 40 px wide at 640, 8 px a frame, scaled to the width.
    func bar(frame n: Int) -> Layout.Rect {
        let scale = max(1, width / 640)
        let x = (n * 8 * scale) % width
        return Layout.Rect(x: x, y: 2 * band, width: min(40 * scale, width - x), height: height - 2 * band)
    }
}

/// The `--desktop` scene: what changes each frame, drawn with rectangles only.
struct DesktopScene {
    static let background = Layout.RGB(r: 30, g: 80, b: 110)
    static let terminalBackground = Layout.RGB(r: 16, g: 16, b: 16)
    static let text = Layout.RGB(r: 200, g: 200, b: 200)
    static let prompt = Layout.RGB(r: 90, g: 220, b: 90)
    static let animation = Layout.RGB(r: 250, g: 200, b: 40)

    let layout: Layout
    let terminal: Layout.Rect
    let lineHeight: Int
    let glyphWidth: Int
    let animationArea: Layout.Rect
    private var drawnBackground = false
    private var random: UInt64 = 0x9E37_79B9_7F4A_7C15

    init(layout: Layout) {
        self.layout = layout
        lineHeight = max(8, layout.height / 45)
        glyphWidth = max(4, lineHeight / 2)
        let lines = (layout.height * 6 / 10) / lineHeight
        terminal = Layout.Rect(x: layout.width / 10, y: layout.height / 8, width: layout.width / 2, height: lines * lineHeight)
        let side = max(24, layout.height / 8)
        animationArea = Layout.Rect(x: layout.width * 3 / 4, y: layout.height * 3 / 4, width: side, height: side)
    }

    /// Where `--small-animation` plays its 320x180 pattern: right of the terminal, below the middle.
    var movingPatternArea: Layout.Rect {
        let w = min(320, layout.width / 4), h = min(180, layout.height / 4)
        return Layout.Rect(x: layout.width * 5 / 8, y: layout.height * 5 / 8, width: w, height: h)
    }

    /// Draws frame `n` into the back buffer and returns the rectangles that changed.
    mutating func draw(frame n: Int, fill: ([Layout.Rect], Layout.RGB) -> Void,
                       scroll: (Layout.Rect, Int) -> Void) -> [Layout.Rect] {
        var dirty = drawBackground(fill: fill)
        dirty.append(contentsOf: drawChanges(frame: n, fill: fill, scroll: scroll))
        return dirty
    }

    /// The background, icons and terminal, the first time only; returns what it drew.
    mutating func drawBackground(fill: ([Layout.Rect], Layout.RGB) -> Void) -> [Layout.Rect] {
        var dirty: [Layout.Rect] = []
        if !drawnBackground {
            fill([Layout.Rect(x: 0, y: 0, width: layout.width, height: layout.height)], Self.background)
            // A few still "icons" down the left side.
            let icon = max(16, layout.height / 20)
            fill((0..<5).map { Layout.Rect(x: icon / 2, y: icon / 2 + $0 * icon * 2, width: icon, height: icon) },
                 Layout.RGB(r: 220, g: 220, b: 230))
            fill([terminal], Self.terminalBackground)
            drawnBackground = true
            dirty.append(Layout.Rect(x: 0, y: 0, width: layout.width, height: layout.height))
        }
        return dirty
    }

    private mutating func drawChanges(frame n: Int, fill: ([Layout.Rect], Layout.RGB) -> Void,
                                      scroll: (Layout.Rect, Int) -> Void) -> [Layout.Rect] {
        var dirty: [Layout.Rect] = []
        // A new line of text every third frame: the terminal scrolls up by one line.
        if n % 3 == 0 {
            scroll(terminal, lineHeight)
            let lineY = terminal.y + terminal.height - lineHeight
            fill([Layout.Rect(x: terminal.x, y: lineY, width: terminal.width, height: lineHeight)], Self.terminalBackground)
            let glyphHeight = lineHeight * 2 / 3
            var glyphs: [Layout.Rect] = []
            var x = terminal.x + glyphWidth * 3
            let end = terminal.x + terminal.width - glyphWidth
            let words = 2 + Int(nextRandom() % 9)
            for _ in 0..<words {
                let letters = 1 + Int(nextRandom() % 9)
                for _ in 0..<letters where x + glyphWidth <= end {
                    glyphs.append(Layout.Rect(x: x, y: lineY + (lineHeight - glyphHeight) / 2, width: glyphWidth - 1, height: glyphHeight))
                    x += glyphWidth
                }
                x += glyphWidth
            }
            fill([Layout.Rect(x: terminal.x + glyphWidth / 2, y: lineY + (lineHeight - glyphHeight) / 2,
                              width: glyphWidth, height: glyphHeight)], Self.prompt)
            fill(glyphs, Self.text)
            dirty.append(terminal)
        }
        // A small square going round a small area, like a spinner.
        fill([animationArea], Self.background)
        let side = animationArea.width / 3
        let positions = [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (1, 2), (0, 2), (0, 1)]
        let (px, py) = positions[(n / 2) % positions.count]
        fill([Layout.Rect(x: animationArea.x + px * side, y: animationArea.y + py * side, width: side, height: side)], Self.animation)
        dirty.append(animationArea)
        return dirty
    }

    private mutating func nextRandom() -> UInt64 {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        return random
    }
}
