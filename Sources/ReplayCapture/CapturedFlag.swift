import CXCB
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `_OPENREPLAYKIT_CAPTURED` (CARDINAL) on a display's root window: 1 while any capture of this
/// process reads that display, else 0. Any toolkit can watch it (PropertyNotify on the root) and
/// hide what it protects; `RPScreen.main.isCaptured` follows it. Several sessions may capture at
/// once: a count per display, the property written when it goes from 0 to 1 and back.
///
/// Blocking (one X round trip): call on a dedicated thread.
package enum CapturedFlag {
    private static let counts = Mutex<[String: Int]>([:])

    /// The property's name.
    package static let propertyName = "_OPENREPLAYKIT_CAPTURED"

    package static func begin(display: String) {
        counts.withLock { counts in
            counts[display, default: 0] += 1
            if counts[display] == 1 { write(1, on: display) }
        }
    }

    package static func end(display: String) {
        counts.withLock { counts in
            guard let count = counts[display], count > 0 else { return }
            counts[display] = count == 1 ? nil : count - 1
            if count == 1 { write(0, on: display) }
        }
    }

    /// Under the lock, so that two sessions' writes land in the order of their counts.
    private static func write(_ value: UInt32, on display: String) {
        guard let x = try? XConnection(display: display) else { return }
        let connection = x.connection
        let atom = WindowCensus.atom(propertyName, connection)
        guard atom != 0 else { return }
        var value = value
        xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), x.root, atom, XCB_ATOM_CARDINAL.rawValue, 32, 1, &value)
        // A round trip: the property is set when this returns.
        free(xcb_get_input_focus_reply(connection, xcb_get_input_focus(connection), nil))
    }
}
