import Foundation
import CXCB
#if canImport(Glibc)
import Glibc
#endif

/// Marks an app's content as protected: every OpenReplayKit session (the person's and every
/// app's) blanks a protected window and silences protected sound.
///
/// - A window: the top-level X11 window gets the property `_OPENREPLAYKIT_PROTECTED` (CARDINAL, 1);
///   any toolkit may set it itself; `protect(window:)` sets it over a short X connection of its own.
/// - Sound: a PulseAudio stream whose proplist has `openreplaykit.protected=1`. An app sets it on
///   its own streams (`pa_proplist_sets(p, "openreplaykit.protected", "1")`), or for all of its
///   streams with `protectAudio()` before its first connection to the sound server (it sets
///   `PULSE_PROP`, which libpulse merges into every stream of the process).
///
/// What this protects against: capture through OpenReplayKit (replayd's sessions). On X11 any
/// client of the display can read any window's pixels itself; this is not a defence against that.
public enum RPContentProtection {
    /// Protects (or unprotects) the top-level window `window` (an X11 window id) on `display`
    /// (default: `DISPLAY`). Throws `invalidParameter` when the display or the window does not exist.
    public static func protect(window: UInt32, protected: Bool = true, display: String? = nil) throws {
        guard let display = display ?? ProcessInfo.processInfo.environment["DISPLAY"], !display.isEmpty else {
            throw RPRecordingError(.invalidParameter, "no X display: set DISPLAY, or pass display:.")
        }
        // A connection of its own, for this one change: the app's toolkit keeps its own.
        guard let connection = xcb_connect(display, nil) else {
            throw RPRecordingError(.invalidParameter, "cannot connect to X display \(display)")
        }
        defer { xcb_disconnect(connection) }
        guard xcb_connection_has_error(connection) == 0 else {
            throw RPRecordingError(.invalidParameter, "cannot connect to X display \(display)")
        }
        let name = "_OPENREPLAYKIT_PROTECTED"
        guard let atomReply = xcb_intern_atom_reply(connection, xcb_intern_atom(connection, 0, UInt16(name.utf8.count), name), nil) else {
            throw RPRecordingError(.failed, "X display \(display) did not answer")
        }
        let atom = atomReply.pointee.atom
        free(atomReply)
        var value: UInt32 = 1
        let cookie = protected
            ? xcb_change_property_checked(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, atom,
                                          XCB_ATOM_CARDINAL.rawValue, 32, 1, &value)
            : xcb_delete_property_checked(connection, window, atom)
        if let error = xcb_request_check(connection, cookie) {
            let code = error.pointee.error_code
            free(error)
            throw RPRecordingError(.invalidParameter, "cannot mark window \(window) on \(display) as \(protected ? "protected" : "unprotected") (X error \(code)): is it a window of this display?")
        }
    }

    /// Marks every PulseAudio stream this process opens from now on as protected (`PULSE_PROP`).
    /// Call it before the app's first connection to the sound server.
    public static func protectAudio() {
        let key = "openreplaykit.protected=1"
        let current = ProcessInfo.processInfo.environment["PULSE_PROP"] ?? ""
        guard !current.contains(key) else { return }
        setenv("PULSE_PROP", current.isEmpty ? key : current + " " + key, 1)
    }
}
