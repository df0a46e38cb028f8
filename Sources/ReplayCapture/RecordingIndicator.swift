public import Logging
import CXCB
import CCairo
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The on-screen sign that a system session captures: a small always-on-top X window at the
/// top-right of the display with a red dot and the elapsed time, redrawn every second. A click on
/// it calls `onClick` (replayd stops the session). replayd leaves it out of the captured frames
/// (`ScreenRecorder.exclude(window:)` with `windowID`).
///
/// Another X client cannot hide it: unmapped it maps itself again, moved it goes back, covered it
/// raises itself; when it stays covered for `coveredLimit`, is covered again and again (a program
/// fighting it for the top), or its window or connection is taken away (`xkill`), it calls
/// `onClick` too: a session must not go on unseen.
///
/// It has its own XCB connection and its own thread (blocking `poll` on the X socket and a wake
/// pipe), so no X call runs on the cooperative pool. `close()` (or deinit) destroys the window,
/// disconnects and joins the thread.
public final class RecordingIndicator: Sendable {
    /// The X window id (leave it out of captures; find it in tests).
    public let windowID: UInt32
    /// Where it is on the root window.
    package let rectangle: PixelRect

    private let worker: IndicatorWorker

    private init(worker: IndicatorWorker, windowID: UInt32, rectangle: PixelRect) {
        self.worker = worker
        self.windowID = windowID
        self.rectangle = rectangle
    }

    /// Opens the indicator on `display` (e.g. `:0`). `onClick` runs on the indicator's thread:
    /// keep it short (start a task, signal something).
    public static func open(display: String, startedAt: ContinuousClock.Instant = .now, logger: Logger,
                            onClick: @escaping @Sendable () -> Void) async throws(IndicatorError) -> RecordingIndicator {
        let worker = try IndicatorWorker(display: display, startedAt: startedAt, logger: logger, onClick: onClick)
        let result: Result<(UInt32, PixelRect), IndicatorError> = await withCheckedContinuation { continuation in
            worker.start { continuation.resume(returning: $0) }
        }
        switch result {
        case .success(let (window, rectangle)):
            return RecordingIndicator(worker: worker, windowID: window, rectangle: rectangle)
        case .failure(let error):
            worker.join()
            throw error
        }
    }

    /// Removes the window and ends the thread (waits for it). Idempotent.
    public func close() {
        worker.stop()
        worker.join()
    }

    /// Removes the window and ends the thread, waiting without blocking a thread of the pool.
    public func close() async {
        worker.stop()
        await worker.ended()
    }

    deinit {
        close()
    }
}


public struct IndicatorError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Owns the XCB connection, the window, the cairo surface and context, and the wake pipe; they are
/// created, used and freed on its one thread only, except the pipe's write end (a plain `write`
/// from `stop()`) and the `finished` semaphore.
///
/// `@unchecked Sendable`: the mutable state below is touched only on the worker thread (`run`)
/// or, for `stopped`, under `lock`.
private final class IndicatorWorker: @unchecked Sendable {
    static let size = (width: 104, height: 30)
    static let margin = 12
    /// How long it may stay covered, raising itself all the while, before the session stops.
    static let coveredLimit: Duration = .seconds(1)
    /// More covers than this in `fightWindow`: a program fights it for the top (a new window covers
    /// it once), and the session stops.
    static let fightCovers = 10
    static let fightWindow: Duration = .seconds(2)
    /// How often it raises itself while covered.
    static let raiseInterval: Int32 = 50

    let display: String
    let startedAt: ContinuousClock.Instant
    let logger: Logger
    let onClick: @Sendable () -> Void

    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var stopped = false
    private var joined = false
    private var started = false
    private var drawFailureLogged = false
    private var ended = false
    private var endWaiters: [CheckedContinuation<Void, Never>] = []

    init(display: String, startedAt: ContinuousClock.Instant, logger: Logger,
         onClick: @escaping @Sendable () -> Void) throws(IndicatorError) {
        self.display = display
        self.startedAt = startedAt
        self.logger = logger
        self.onClick = onClick
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw IndicatorError(message: "cannot create the indicator's wake pipe: \(String(cString: strerror(errno)))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    func start(_ ready: @escaping @Sendable (Result<(UInt32, PixelRect), IndicatorError>) -> Void) {
        lock.withLock { started = true }
        let thread = Thread { [self] in
            run(ready)
            let waiters = lock.withLock {
                ended = true
                defer { endWaiters = [] }
                return endWaiters
            }
            for waiter in waiters { waiter.resume() }
            finished.signal()
        }
        thread.name = "ork-indicator"
        thread.start()
    }

    func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        if first {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    /// Returns once the thread has finished (at once when it never started).
    func ended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = lock.withLock {
                if !started || ended { return true }
                endWaiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func join() {
        let wait = lock.withLock {
            defer { joined = true }
            return started && !joined && !ended
        }
        if wait && Thread.current.name != "ork-indicator" {
            finished.wait()
        }
    }

    // MARK: the thread

    private func run(_ ready: @Sendable (Result<(UInt32, PixelRect), IndicatorError>) -> Void) {
        var screenNumber: Int32 = 0
        guard let connection = xcb_connect(display, &screenNumber), xcb_connection_has_error(connection) == 0 else {
            ready(.failure(IndicatorError(message: "cannot connect to X display \(display) for the recording indicator")))
            return
        }
        defer { xcb_disconnect(connection) }

        var screens = xcb_setup_roots_iterator(xcb_get_setup(connection))
        for _ in 0..<max(0, Int(screenNumber)) where screens.rem > 0 { xcb_screen_next(&screens) }
        guard screens.rem > 0, let screen = screens.data?.pointee,
              let visual = Self.visualType(of: screens.data!) else {
            ready(.failure(IndicatorError(message: "X display \(display) has no screen \(screenNumber)")))
            return
        }

        let rectangle = PixelRect(x: max(0, Int(screen.width_in_pixels) - Self.size.width - Self.margin),
                                           y: Self.margin, width: Self.size.width, height: Self.size.height)
        let window = xcb_generate_id(connection)
        let eventMask = XCB_EVENT_MASK_EXPOSURE.rawValue | XCB_EVENT_MASK_BUTTON_PRESS.rawValue
            | XCB_EVENT_MASK_VISIBILITY_CHANGE.rawValue | XCB_EVENT_MASK_STRUCTURE_NOTIFY.rawValue
        // Values in the order of their mask bits: BACK_PIXEL, OVERRIDE_REDIRECT, EVENT_MASK.
        let values: [UInt32] = [screen.black_pixel, 1, eventMask]
        let valueMask = XCB_CW_BACK_PIXEL.rawValue | XCB_CW_OVERRIDE_REDIRECT.rawValue | XCB_CW_EVENT_MASK.rawValue
        let cookie = xcb_create_window_checked(connection, UInt8(XCB_COPY_FROM_PARENT), window, screen.root,
                                               Int16(rectangle.x), Int16(rectangle.y),
                                               UInt16(rectangle.width), UInt16(rectangle.height), 0,
                                               UInt16(XCB_WINDOW_CLASS_INPUT_OUTPUT.rawValue), screen.root_visual,
                                               valueMask, values)
        if let error = xcb_request_check(connection, cookie) {
            let code = error.pointee.error_code
            free(error)
            ready(.failure(IndicatorError(message: "X refused the indicator window (error \(code))")))
            return
        }
        let title = "OpenReplayKit recording indicator"
        xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, XCB_ATOM_WM_NAME.rawValue,
                            XCB_ATOM_STRING.rawValue, 8, UInt32(title.utf8.count), title)
        let windowClass = "replayd-indicator\0OpenReplayKit\0"
        xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, XCB_ATOM_WM_CLASS.rawValue,
                            XCB_ATOM_STRING.rawValue, 8, UInt32(windowClass.utf8.count), windowClass)
        xcb_map_window(connection, window)
        defer {
            xcb_destroy_window(connection, window)
            xcb_flush(connection)
        }

        guard let surface = cairo_xcb_surface_create(connection, window, visual,
                                                     Int32(rectangle.width), Int32(rectangle.height)),
              cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS else {
            ready(.failure(IndicatorError(message: "cairo cannot draw on the indicator window")))
            return
        }
        defer {
            // cairo keeps a device per xcb connection (its screens, its SHM pools) until the device is
            // finished: without this, every session's indicator left one behind (memory replayd never
            // got back), and a later connection at the same address met the stale device and cairo
            // aborted (`_get_screen_index: Assertion !"reached"`).
            let device = cairo_device_reference(cairo_surface_get_device(surface))
            cairo_surface_finish(surface)
            cairo_surface_destroy(surface)
            if let device {
                cairo_device_finish(device)
                cairo_device_destroy(device)
            }
        }

        draw(surface, rectangle)
        raise(connection, window)
        xcb_flush(connection)
        logger.debug("indicator shown", metadata: ["display": "\(display)", "window": "\(window)", "rectangle": "\(rectangle)"])
        ready(.success((window, rectangle)))

        eventLoop(connection, window, surface, rectangle)
    }

    private func eventLoop(_ connection: OpaquePointer, _ window: UInt32,
                           _ surface: OpaquePointer, _ rectangle: PixelRect) {
        let clock = ContinuousClock()
        var shownSecond = -1
        var coveredSince: ContinuousClock.Instant?
        var covers: [ContinuousClock.Instant] = []
        var fds = [pollfd(fd: xcb_get_file_descriptor(connection), events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        /// Another program hid it for good: the session stops (once).
        func taken(_ how: String) {
            logger.warning("\(how): stopping the session, which must not go on unseen")
            onClick()
        }
        while true {
            // Wake at the next whole second of elapsed time; often while covered, to raise itself.
            let elapsed = clock.now - startedAt
            let intoSecond = Int(elapsed.components.attoseconds / 1_000_000_000_000_000)
            let timeout = coveredSince == nil ? Int32(max(10, 1000 - intoSecond)) : Self.raiseInterval
            fds[0].revents = 0
            fds[1].revents = 0
            let ready = poll(&fds, 2, timeout)
            if ready < 0 && errno != EINTR { break }
            if fds[1].revents != 0 { break }

            var redraw = false
            while let event = xcb_poll_for_event(connection) {
                switch event.pointee.response_type & 0x7f {
                case UInt8(XCB_EXPOSE):
                    redraw = true
                case UInt8(XCB_BUTTON_PRESS):
                    logger.info("indicator clicked: stopping the session")
                    onClick()
                case UInt8(XCB_VISIBILITY_NOTIFY):
                    let state = event.withMemoryRebound(to: xcb_visibility_notify_event_t.self, capacity: 1) { $0.pointee.state }
                    // Another session's indicator (a broadcast beside a recording) is no cover to fight.
                    if state == UInt8(XCB_VISIBILITY_UNOBSCURED.rawValue) || !coveredByAnotherProgram(connection, window, rectangle) {
                        coveredSince = nil
                    } else {
                        if coveredSince == nil {
                            covers = covers.filter { clock.now - $0 < Self.fightWindow } + [clock.now]
                            if covers.count > Self.fightCovers {
                                covers = []
                                taken("another window covered the indicator \(Self.fightCovers) times in \(Self.fightWindow)")
                            }
                        }
                        coveredSince = coveredSince ?? clock.now
                        raise(connection, window)
                    }
                case UInt8(XCB_UNMAP_NOTIFY):
                    // Only another client unmaps it: shown again at once.
                    logger.warning("another program unmapped the indicator: shown again")
                    xcb_map_window(connection, window)
                    raise(connection, window)
                case UInt8(XCB_CONFIGURE_NOTIFY):
                    let moved = event.withMemoryRebound(to: xcb_configure_notify_event_t.self, capacity: 1) { $0.pointee }
                    if Int(moved.x) != rectangle.x || Int(moved.y) != rectangle.y
                        || Int(moved.width) != rectangle.width || Int(moved.height) != rectangle.height {
                        let values: [UInt32] = [UInt32(rectangle.x), UInt32(rectangle.y), UInt32(rectangle.width), UInt32(rectangle.height)]
                        let mask = XCB_CONFIG_WINDOW_X.rawValue | XCB_CONFIG_WINDOW_Y.rawValue
                            | XCB_CONFIG_WINDOW_WIDTH.rawValue | XCB_CONFIG_WINDOW_HEIGHT.rawValue
                        xcb_configure_window(connection, window, UInt16(mask), values)
                        raise(connection, window)
                    }
                case UInt8(XCB_DESTROY_NOTIFY):
                    free(event)
                    taken("another program destroyed the indicator")
                    return
                default:
                    break
                }
                free(event)
            }
            if xcb_connection_has_error(connection) != 0 {
                taken("the indicator lost its X connection to \(display) (killed by another program, or the display went away)")
                break
            }
            if let since = coveredSince {
                if !coveredByAnotherProgram(connection, window, rectangle) {
                    coveredSince = nil
                } else if clock.now - since >= Self.coveredLimit {
                    taken("another window kept the indicator covered for \(Self.coveredLimit)")
                    coveredSince = nil
                } else {
                    raise(connection, window)
                }
            }
            let second = Int((clock.now - startedAt).components.seconds)
            if redraw || second != shownSecond {
                shownSecond = second
                draw(surface, rectangle)
                raise(connection, window)
            }
            xcb_flush(connection)
        }
    }

    /// Whether a viewable window above ours, other than an indicator of replayd's, overlaps it.
    private func coveredByAnotherProgram(_ connection: OpaquePointer, _ window: UInt32, _ rectangle: PixelRect) -> Bool {
        let root = xcb_setup_roots_iterator(xcb_get_setup(connection)).data.pointee.root
        guard let tree = xcb_query_tree_reply(connection, xcb_query_tree(connection, root), nil) else { return true }
        let children = Array(UnsafeBufferPointer(start: xcb_query_tree_children(tree), count: Int(xcb_query_tree_children_length(tree))))
        free(tree)
        guard let ours = children.firstIndex(of: window) else { return true }
        let above = Array(children[(ours + 1)...])
        let attributes = above.map { xcb_get_window_attributes(connection, $0) }
        let geometries = above.map { xcb_get_geometry(connection, $0) }
        let classes = above.map { xcb_get_property(connection, 0, $0, XCB_ATOM_WM_CLASS.rawValue, XCB_ATOM_STRING.rawValue, 0, 16) }
        var covered = false
        for index in above.indices {
            let attribute = xcb_get_window_attributes_reply(connection, attributes[index], nil)
            let geometry = xcb_get_geometry_reply(connection, geometries[index], nil)
            let wmClass = xcb_get_property_reply(connection, classes[index], nil)
            defer { free(attribute); free(geometry); free(wmClass) }
            guard let attribute, let geometry, attribute.pointee.map_state == UInt8(XCB_MAP_STATE_VIEWABLE.rawValue),
                  attribute.pointee._class != UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue) else { continue }
            let border = Int(geometry.pointee.border_width)
            let rect = PixelRect(x: Int(geometry.pointee.x), y: Int(geometry.pointee.y),
                                 width: Int(geometry.pointee.width) + 2 * border, height: Int(geometry.pointee.height) + 2 * border)
            guard !rect.intersection(rectangle).isEmpty else { continue }
            let instance = wmClass.flatMap { reply -> String? in
                guard let value = xcb_get_property_value(reply) else { return nil }
                let bytes = UnsafeRawBufferPointer(start: value, count: Int(xcb_get_property_value_length(reply)))
                return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if instance != "replayd-indicator" { covered = true }
        }
        return covered
    }

    private func raise(_ connection: OpaquePointer, _ window: UInt32) {
        let values: [UInt32] = [XCB_STACK_MODE_ABOVE.rawValue]
        xcb_configure_window(connection, window, UInt16(XCB_CONFIG_WINDOW_STACK_MODE.rawValue), values)
    }

    /// Draws the whole window with a fresh cairo context (a context's errors are sticky: one bad
    /// draw must not blank every later one).
    private func draw(_ surface: OpaquePointer, _ rectangle: PixelRect) {
        guard let cairo = cairo_create(surface) else { return }
        defer { cairo_destroy(cairo) }
        let width = Double(rectangle.width), height = Double(rectangle.height)
        cairo_set_source_rgb(cairo, 0.1, 0.1, 0.1)
        cairo_paint(cairo)
        cairo_set_source_rgb(cairo, 230 / 255, 30 / 255, 30 / 255)
        cairo_arc(cairo, height / 2, height / 2, 8, 0, 2 * Double.pi)
        cairo_fill(cairo)
        cairo_set_source_rgb(cairo, 1, 1, 1)
        cairo_select_font_face(cairo, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD)
        cairo_set_font_size(cairo, 15)
        let text = Self.elapsedText(seconds: Int((ContinuousClock.now - startedAt).components.seconds))
        var extents = cairo_text_extents_t()
        cairo_text_extents(cairo, text, &extents)
        let left = height - 2
        let x = left + (width - left - extents.x_advance) / 2
        cairo_move_to(cairo, x, height / 2 - extents.y_bearing - extents.height / 2)
        cairo_show_text(cairo, text)
        cairo_surface_flush(surface)
        let status = cairo_status(cairo)
        if status != CAIRO_STATUS_SUCCESS, !drawFailureLogged {
            drawFailureLogged = true
            logger.warning("the indicator cannot draw: \(String(cString: cairo_status_to_string(status)))")
        }
    }

    /// `m:ss`, then `h:mm:ss` from an hour on.
    static func elapsedText(seconds: Int) -> String {
        let s = max(0, seconds)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        if s >= 3600 { return "\(s / 3600):\(two(s / 60 % 60)):\(two(s % 60))" }
        return "\(two(s / 60)):\(two(s % 60))"
    }

    private static func visualType(of screen: UnsafeMutablePointer<xcb_screen_t>) -> UnsafeMutablePointer<xcb_visualtype_t>? {
        var depths = xcb_screen_allowed_depths_iterator(screen)
        while depths.rem > 0 {
            var visuals = xcb_depth_visuals_iterator(depths.data)
            while visuals.rem > 0 {
                if visuals.data.pointee.visual_id == screen.pointee.root_visual { return visuals.data }
                xcb_visualtype_next(&visuals)
            }
            xcb_depth_next(&depths)
        }
        return nil
    }
}
