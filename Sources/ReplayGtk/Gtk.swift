import CGtk
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// GTK 4 for Swift, the little of it that OpenReplayKit's windows use: start GTK on one display,
/// run its main loop until done, timers. Everything GTK runs on the main thread, which is the
/// main actor: every type here is `@MainActor`, and C callbacks re-enter it with `assumeIsolated`.
@MainActor
public enum Gtk {
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    private static var finished = false

    /// Starts GTK on the display `display`, with the program name `programName` (`g_set_prgname`:
    /// the X11 `WM_CLASS` instance of every window, and the application's name on the accessibility
    /// bus). GTK draws with cairo unless `GSK_RENDERER` says otherwise: a system dialog needs no GPU,
    /// and a display without GL (Xvfb, a remote session) would otherwise first try and fail to make a
    /// GL context.
    ///
    /// `display` is an X11 display (`:N`), or a Wayland one as replayd names it (`wayland:NAME`,
    /// ReplayIPC's `DesktopSession`): then the windows are native Wayland windows (GTK's Wayland
    /// backend, never XWayland) and on the accessibility bus like any GTK window, so that a person
    /// with a screen reader can answer them.
    public static func start(display: String?, programName: String) throws(StartError) {
        let waylandPrefix = "wayland:"
        if let display, display.hasPrefix(waylandPrefix) {
            let name = String(display.dropFirst(waylandPrefix.count))
            setenv("WAYLAND_DISPLAY", name.isEmpty ? "wayland-0" : name, 1)
            setenv("GDK_BACKEND", "wayland", 1)
            setenv("GSK_RENDERER", "cairo", 0)
            g_set_prgname(programName)
            guard gtk_init_check() != 0 else {
                throw StartError(description: "cannot open the Wayland display \(name) (is XDG_RUNTIME_DIR this session's?)")
            }
            return
        }
        if let display { setenv("DISPLAY", display, 1) }
        setenv("GDK_BACKEND", "x11", 1)
        setenv("GSK_RENDERER", "cairo", 0)
        // No session bus is needed for these windows; GTK must not wait for an accessibility bus.
        setenv("NO_AT_BRIDGE", "1", 0)
        setenv("GTK_A11Y", "none", 0)
        // Without a session bus, GSettings (the file chooser's) would try to start one at every change.
        if ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] == nil { setenv("GSETTINGS_BACKEND", "memory", 0) }
        g_set_prgname(programName)
        guard gtk_init_check() != 0 else {
            throw StartError(description: "cannot open the X11 display \(display ?? ProcessInfo.processInfo.environment["DISPLAY"] ?? "(DISPLAY unset)")")
        }
    }

    /// Runs GTK's main loop until `quit()`.
    public static func run() {
        while !finished { g_main_context_iteration(nil, 1) }
    }

    /// Ends `run()` after the current event.
    public static func quit() {
        finished = true
        g_main_context_wakeup(nil)
    }

    /// Runs pending GTK work without blocking (e.g. to let a window be drawn before a long task).
    public static func drainEvents() {
        while g_main_context_iteration(nil, 0) != 0 {}
    }

    /// Calls `body` once after `milliseconds`.
    public static func after(milliseconds: UInt32, _ body: @escaping @MainActor () -> Void) {
        let box = Unmanaged.passRetained(BoolCallback { body(); return false }).toOpaque()
        g_timeout_add_full(G_PRIORITY_DEFAULT, milliseconds, { data in
            MainActor.assumeIsolated { BoolCallback.from(data).call() } ? 1 : 0
        }, box, releaseCallback)
    }

    /// Runs `body` on GTK's main thread at its next idle moment. Callable from any thread: a
    /// library's completion handler or a capture thread hands its result to the windows this way.
    public nonisolated static func post(_ body: @escaping @MainActor @Sendable () -> Void) {
        let box = Unmanaged.passRetained(BoolCallback { body(); return false }).toOpaque()
        g_idle_add_full(G_PRIORITY_DEFAULT, { data in
            // GLib calls this on the main context's thread, GTK's: the main actor. (The box's address
            // crosses into the isolated closure as a number: the pointer type is not Sendable.)
            let address = Int(bitPattern: data)
            return MainActor.assumeIsolated { BoolCallback.from(UnsafeMutableRawPointer(bitPattern: address)).call() } ? 1 : 0
        }, box, releaseCallback)
    }

    /// Calls `body` every `milliseconds` while it returns true.
    public static func every(milliseconds: UInt32, _ body: @escaping @MainActor () -> Bool) {
        let box = Unmanaged.passRetained(BoolCallback(body)).toOpaque()
        g_timeout_add_full(G_PRIORITY_DEFAULT, milliseconds, { data in
            MainActor.assumeIsolated { BoolCallback.from(data).call() } ? 1 : 0
        }, box, releaseCallback)
    }

    /// Loads a style sheet for every widget of the display.
    public static func addStyleSheet(_ css: String) {
        guard let provider = gtk_css_provider_new(), let display = gdk_display_get_default() else { return }
        gtk_css_provider_load_from_data(provider, css, -1)
        gtk_style_context_add_provider_for_display(display, OpaquePointer(provider), UInt32(GTK_STYLE_PROVIDER_PRIORITY_APPLICATION))
        g_object_unref(provider)
    }
}
