import CXCB
import Synchronization
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Follows the focused application of a display, as the window manager says it
/// (`_NET_ACTIVE_WINDOW` on the root window): on a thread of its own with its own X connection,
/// it calls `changed` with the pid owning the newly active window (X-Resource's word, else the
/// window's `_NET_WM_PID`) each time that pid changes. Nil when no window is active or its owner
/// is unknown. `stop()` ends the thread.
package final class FocusWatcher: Sendable {
    private let stopped = Atomic<Bool>(false)

    package init(display: String, changed: @escaping @Sendable (Int32?) -> Void) throws(XDisplayError) {
        let x = try XConnection(display: display)
        let thread = Thread { [self] in
            Self.watch(x, changed: changed, stopped: { self.stopped.load(ordering: .relaxed) })
        }
        thread.name = "focus-watcher"
        thread.start()
    }

    package func stop() { stopped.store(true, ordering: .relaxed) }

    private static func watch(_ x: XConnection, changed: @Sendable (Int32?) -> Void, stopped: () -> Bool) {
        let connection = x.connection
        let active = WindowCensus.atom("_NET_ACTIVE_WINDOW", connection)
        let netWMPID = WindowCensus.atom("_NET_WM_PID", connection)
        let hasResource = WindowCensus.hasExtension("X-Resource", connection)
        if hasResource { free(xcb_res_query_version_reply(connection, xcb_res_query_version(connection, 1, 2), nil)) }
        let mask: [UInt32] = [XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue]
        xcb_change_window_attributes(connection, x.root, XCB_CW_EVENT_MASK.rawValue, mask)
        xcb_flush(connection)

        func property(_ window: xcb_window_t, _ atom: xcb_atom_t, _ type: xcb_atom_t) -> UInt32? {
            guard let reply = xcb_get_property_reply(connection, xcb_get_property(connection, 0, window, atom, type, 0, 1), nil) else { return nil }
            defer { free(reply) }
            guard xcb_get_property_value_length(reply) >= 4, let value = xcb_get_property_value(reply) else { return nil }
            return value.load(as: UInt32.self)
        }
        func owner(_ window: xcb_window_t) -> Int32? {
            if hasResource {
                var spec = xcb_res_client_id_spec_t(client: window, mask: XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID.rawValue)
                if let reply = xcb_res_query_client_ids_reply(connection, xcb_res_query_client_ids(connection, 1, &spec), nil) {
                    defer { free(reply) }
                    var iterator = xcb_res_query_client_ids_ids_iterator(reply)
                    while iterator.rem > 0 {
                        if let value = iterator.data, value.pointee.spec.mask & XCB_RES_CLIENT_ID_MASK_LOCAL_CLIENT_PID.rawValue != 0,
                           xcb_res_client_id_value_value_length(value) >= 1, let pid = xcb_res_client_id_value_value(value) {
                            return Int32(bitPattern: pid.pointee)
                        }
                        xcb_res_client_id_value_next(&iterator)
                    }
                }
            }
            return property(window, netWMPID, XCB_ATOM_CARDINAL.rawValue).map { Int32(bitPattern: $0) }
        }
        func focused() -> Int32? {
            guard let window = property(x.root, active, XCB_ATOM_WINDOW.rawValue), window != 0 else { return nil }
            return owner(window)
        }

        var last: Int32?? = .none
        func report() {
            let now = focused()
            if last != .some(now) {
                last = .some(now)
                changed(now)
            }
        }
        report()
        let descriptor = xcb_get_file_descriptor(connection)
        while !stopped(), !x.hasFailed {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, 200)
            var sawActive = false
            while let event = xcb_poll_for_event(connection) {
                defer { free(event) }
                if event.pointee.response_type & 0x7f == UInt8(XCB_PROPERTY_NOTIFY) {
                    let notify = UnsafeRawPointer(event).load(as: xcb_property_notify_event_t.self)
                    if notify.atom == active { sawActive = true }
                }
            }
            if sawActive { report() }
        }
    }
}
