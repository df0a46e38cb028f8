import CXCB
import ReplayMedia
#if canImport(Glibc)
import Glibc
#endif

/// Why an X display cannot be used.
public struct XDisplayError: Error, Sendable, CustomStringConvertible {
    public var display: String
    public var message: String
    public var description: String { message }
}

/// One XCB connection and the screen it was opened for. The sole owner of the `xcb_connection_t`;
/// used by one thread at a time (its owner's capture or event thread).
package final class XConnection: @unchecked Sendable {
    let connection: OpaquePointer
    let screen: UnsafeMutablePointer<xcb_screen_t>
    package let displayName: String

    package init(display: String) throws(XDisplayError) {
        var screenNumber: Int32 = 0
        guard let connection = xcb_connect(display, &screenNumber) else {
            throw XDisplayError(display: display, message: "cannot open X display \(display)")
        }
        let failure = xcb_connection_has_error(connection)
        if failure != 0 {
            xcb_disconnect(connection)
            switch failure {
            case XCB_CONN_CLOSED_INVALID_SCREEN:
                throw XDisplayError(display: display, message: "cannot open X display \(display): its server answers but has no screen "
                                    + "\(screenNumber); leave out the .\(screenNumber)")
            case XCB_CONN_CLOSED_PARSE_ERR:
                throw XDisplayError(display: display, message: "\(display) is not an X display name: write it like :0 or :1")
            default:
                throw XDisplayError(display: display,
                                    message: "cannot open X display \(display): no X server answers there")
            }
        }
        var iterator = xcb_setup_roots_iterator(xcb_get_setup(connection))
        var index: Int32 = 0
        while index < screenNumber, iterator.rem > 0 {
            xcb_screen_next(&iterator)
            index += 1
        }
        guard iterator.rem > 0, let screen = iterator.data else {
            xcb_disconnect(connection)
            throw XDisplayError(display: display, message: "X display \(display) has no screen \(screenNumber)")
        }
        self.connection = connection
        self.screen = screen
        self.displayName = display
    }

    deinit {
        xcb_disconnect(connection)
    }

    var root: xcb_window_t { screen.pointee.root }
    package var hasFailed: Bool { xcb_connection_has_error(connection) != 0 }

    /// Waits until the server sends something or until `deadline` (monotonic ns): false when the
    /// deadline came first. Events already read into XCB's queue do not wake it: take those first.
    func waitForInput(until deadline: Int64) -> Bool {
        let left = deadline - MonotonicClock.now()
        guard left > 0 else { return false }
        var entry = pollfd(fd: xcb_get_file_descriptor(connection), events: Int16(POLLIN), revents: 0)
        // Rounded up, so that a wait never ends before the deadline and spins.
        return poll(&entry, 1, Int32((left + 999_999) / 1_000_000)) != 0
    }

    /// Why the connection failed, in words (XCB's error codes).
    package var failure: String {
        switch xcb_connection_has_error(connection) {
        case 0: "no error"
        case XCB_CONN_ERROR: "the socket or stream failed (the X server went away?)"
        case XCB_CONN_CLOSED_EXT_NOTSUPPORTED: "an extension the server does not support was used"
        case XCB_CONN_CLOSED_MEM_INSUFFICIENT: "out of memory"
        case XCB_CONN_CLOSED_REQ_LEN_EXCEED: "a request was longer than the server accepts"
        case XCB_CONN_CLOSED_PARSE_ERR: "the display name could not be parsed"
        case XCB_CONN_CLOSED_INVALID_SCREEN: "the display has no such screen"
        case let code: "XCB error \(code)"
        }
    }

    /// The root window's current size (it changes with RandR).
    package func rootSize() -> (width: Int, height: Int) {
        let cookie = xcb_get_geometry(connection, root)
        guard let reply = xcb_get_geometry_reply(connection, cookie, nil) else {
            return (Int(screen.pointee.width_in_pixels), Int(screen.pointee.height_in_pixels))
        }
        defer { free(reply) }
        return (Int(reply.pointee.width), Int(reply.pointee.height))
    }

    /// Bits per pixel the server uses for `depth` in ZPixmap images.
    package func bitsPerPixel(depth: UInt8) -> Int {
        let setup = xcb_get_setup(connection)
        var iterator = xcb_setup_pixmap_formats_iterator(setup)
        while iterator.rem > 0 {
            if let format = iterator.data, format.pointee.depth == depth { return Int(format.pointee.bits_per_pixel) }
            xcb_format_next(&iterator)
        }
        return 0
    }

    /// A window's rectangle in root coordinates (mapped or not), or nil when it is gone.
    func rootRectangle(of window: xcb_window_t) -> PixelRect? {
        guard let geometry = xcb_get_geometry_reply(connection, xcb_get_geometry(connection, window), nil) else { return nil }
        defer { free(geometry) }
        guard let translated = xcb_translate_coordinates_reply(connection, xcb_translate_coordinates(connection, window, root, 0, 0), nil) else { return nil }
        defer { free(translated) }
        let border = Int(geometry.pointee.border_width)
        return PixelRect(x: Int(translated.pointee.dst_x) - border, y: Int(translated.pointee.dst_y) - border,
                         width: Int(geometry.pointee.width) + 2 * border, height: Int(geometry.pointee.height) + 2 * border)
    }
}

/// An integer rectangle of pixels.
package struct PixelRect: Sendable, Equatable, CustomStringConvertible {
    package var x: Int
    package var y: Int
    package var width: Int
    package var height: Int

    package init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    package var description: String { "\(width)x\(height)+\(x)+\(y)" }
    package var isEmpty: Bool { width <= 0 || height <= 0 }
    package var maxX: Int { x + width }
    package var maxY: Int { y + height }
    package var area: Int { isEmpty ? 0 : width * height }

    package func intersection(_ other: PixelRect) -> PixelRect {
        let x0 = max(x, other.x), y0 = max(y, other.y)
        let x1 = min(maxX, other.maxX), y1 = min(maxY, other.maxY)
        return x1 > x0 && y1 > y0 ? PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) : PixelRect(x: 0, y: 0, width: 0, height: 0)
    }

    package func union(_ other: PixelRect) -> PixelRect {
        if isEmpty { return other }
        if other.isEmpty { return self }
        let x0 = min(x, other.x), y0 = min(y, other.y)
        return PixelRect(x: x0, y: y0, width: max(maxX, other.maxX) - x0, height: max(maxY, other.maxY) - y0)
    }

    package func offsetBy(dx: Int, dy: Int) -> PixelRect { PixelRect(x: x + dx, y: y + dy, width: width, height: height) }
    package func contains(_ other: PixelRect) -> Bool { intersection(other) == other }

    /// What of this rectangle `other` does not cover: up to four rectangles, not overlapping.
    package func subtracting(_ other: PixelRect) -> [PixelRect] {
        let cut = intersection(other)
        guard !cut.isEmpty else { return isEmpty ? [] : [self] }
        let pieces = [
            PixelRect(x: x, y: y, width: width, height: cut.y - y),                      // above
            PixelRect(x: x, y: cut.maxY, width: width, height: maxY - cut.maxY),         // below
            PixelRect(x: x, y: cut.y, width: cut.x - x, height: cut.height),             // left
            PixelRect(x: cut.maxX, y: cut.y, width: maxX - cut.maxX, height: cut.height), // right
        ]
        return pieces.filter { !$0.isEmpty }
    }
}
