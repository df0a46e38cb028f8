import Foundation
import ReplayIPC
#if canImport(Glibc)
import Glibc
#endif

/// Marks an app's content as protected: every OpenReplayKit session (the person's and every
/// app's) blanks a protected window and silences protected sound.
///
/// - A window: the top-level X11 window gets the property `_OPENREPLAYKIT_PROTECTED` (CARDINAL, 1);
///   any toolkit may set it itself. `protect(window:)` sets it with `xprop` (x11-utils).
/// - Sound: a PulseAudio stream whose proplist has `openreplaykit.protected=1`. An app sets it on
///   its own streams (`pa_proplist_sets(p, "openreplaykit.protected", "1")`), or for all of its
///   streams with `protectAudio()` before its first connection to the sound server (it sets
///   `PULSE_PROP`, which libpulse merges into every stream of the process).
///
/// What this protects against: capture through OpenReplayKit (replayd's sessions). On X11 any
/// client of the display can read any window's pixels itself; this is not a defence against that.
public enum RPContentProtection {
    /// Protects (or unprotects) the top-level window `window` (an X11 window id) on `display`
    /// (default: `DISPLAY`).
    public static func protect(window: UInt32, protected: Bool = true, display: String? = nil) throws {
        guard let display = display ?? ProcessInfo.processInfo.environment["DISPLAY"], !display.isEmpty else {
            throw RPRecordingError(.invalidParameter, "no X display: set DISPLAY, or pass display:.")
        }
        guard let xprop = Spawn.executable(named: "xprop") else {
            throw RPRecordingError(.failed, "xprop (Debian: x11-utils) is needed to set _OPENREPLAYKIT_PROTECTED: install it, or set the property with your toolkit.")
        }
        let arguments = protected
            ? ["-display", display, "-id", String(window), "-f", "_OPENREPLAYKIT_PROTECTED", "32c", "-set", "_OPENREPLAYKIT_PROTECTED", "1"]
            : ["-display", display, "-id", String(window), "-remove", "_OPENREPLAYKIT_PROTECTED"]
        let pid: Int32
        do throws(ReplayError) {
            pid = try Spawn.start(xprop, arguments: arguments, standardOutput: .file("/dev/null", append: true),
                                  standardError: .file("/dev/null", append: true), group: .newProcessGroup)
        } catch {
            throw RPRecordingError(.failed, "cannot run xprop: \(error.message)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else {
            throw RPRecordingError(.invalidParameter, "cannot mark window \(window) on \(display) as protected (xprop exit status \(status >> 8)): is it a window of this display?")
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
