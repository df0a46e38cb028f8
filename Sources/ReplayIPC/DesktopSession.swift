import Foundation

/// Which desktop a request is about, named in the `display` field replayd receives: an X display
/// (`:0`) or a Wayland one (`wayland:wayland-0`). A Wayland session is recorded through the desktop's
/// screen-cast portal, never through XWayland, even where `DISPLAY` is set beside `WAYLAND_DISPLAY`.
public enum DesktopSession: Sendable, Equatable {
    case x11(display: String)
    case wayland(display: String)

    public static let waylandPrefix = "wayland:"

    /// Parses a `display` field; nil when empty.
    public init?(displayName: String) {
        if displayName.hasPrefix(Self.waylandPrefix) {
            let name = String(displayName.dropFirst(Self.waylandPrefix.count))
            self = .wayland(display: name.isEmpty ? "wayland-0" : name)
        } else if displayName.isEmpty {
            return nil
        } else {
            self = .x11(display: displayName)
        }
    }

    /// The session this process runs in: Wayland when `WAYLAND_DISPLAY` is set (and the session is
    /// not said to be X11), else the X display of `DISPLAY`; nil with neither.
    public static func current(environment: [String: String]? = nil) -> DesktopSession? {
        let environment = environment ?? ProcessInfo.processInfo.environment
        if let wayland = environment["WAYLAND_DISPLAY"], !wayland.isEmpty, environment["XDG_SESSION_TYPE"] != "x11" {
            return .wayland(display: wayland)
        }
        if let display = environment["DISPLAY"], !display.isEmpty { return .x11(display: display) }
        return nil
    }

    /// What goes in a request's `display` field.
    public var displayName: String {
        switch self {
        case .x11(let display): display
        case .wayland(let display): Self.waylandPrefix + display
        }
    }

    public var isWayland: Bool {
        if case .wayland = self { true } else { false }
    }

    /// The desktop's name for messages, from `XDG_CURRENT_DESKTOP` (e.g. "GNOME", "KDE", "sway").
    public static func desktopName(environment: [String: String]? = nil) -> String {
        let environment = environment ?? ProcessInfo.processInfo.environment
        let names = (environment["XDG_CURRENT_DESKTOP"] ?? "").split(separator: ":").map(String.init)
        return names.first ?? (environment["SWAYSOCK"] != nil ? "sway" : "this Wayland desktop")
    }
}

/// Where the person's lasting choices live: `$XDG_STATE_HOME/openreplaykit/` (else `~/.local/state/openreplaykit/`).
public enum StatePaths {
    public static func directory(environment: [String: String]? = nil) -> String {
        let environment = environment ?? ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/openreplaykit" }
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
        return home + "/.local/state/openreplaykit"
    }

    /// The screen-cast portal's restore token: the person's "share this screen" kept for the next
    /// recording (0600). `replay privacy reset` removes it, and the desktop asks again.
    public static func portalRestoreToken(environment: [String: String]? = nil) -> String {
        directory(environment: environment) + "/portal-restore-token"
    }
}

/// What each Wayland desktop lets replayd do, in the words `replay doctor` and refusals use.
public enum WaylandSupport {
    /// OpenReplayKit's GNOME Shell extension (dist/gnome-shell/), which tells replayd alone which
    /// windows are an app's.
    public static let gnomeExtensionUUID = "openreplaykit@openreplaykit.org"
    /// The one command that enables it (once `make install` has put it where GNOME Shell reads extensions).
    public static let gnomeExtensionEnableCommand = "gnome-extensions enable \(gnomeExtensionUUID)"

    /// Whether the desktop is GNOME (`XDG_CURRENT_DESKTOP` names it, e.g. "GNOME" or "ubuntu:GNOME").
    public static func isGnome(environment: [String: String]? = nil) -> Bool {
        let environment = environment ?? ProcessInfo.processInfo.environment
        return (environment["XDG_CURRENT_DESKTOP"] ?? "").split(separator: ":").contains { $0.lowercased() == "gnome" }
    }

    /// Whether replayd may record an app's own windows on this Wayland desktop when what it needs
    /// answers: only GNOME, through the extension and Mutter's per-window screen cast.
    public static func appSessionsPossible(environment: [String: String]? = nil) -> Bool {
        isGnome(environment: environment)
    }

    /// Why an app's own sessions (its recording, capture, clips, broadcast) are refused on this
    /// Wayland desktop; replayd never cuts an app's windows out of the whole screen. On GNOME,
    /// `gnomeExtensionProblem` says why the extension did not answer.
    public static func appSessionsUnavailable(environment: [String: String]? = nil, gnomeExtensionProblem: String? = nil) -> String {
        let environment = environment ?? ProcessInfo.processInfo.environment
        let desktop = DesktopSession.desktopName(environment: environment)
        let lacks: String
        if isGnome(environment: environment) {
            lacks = "OpenReplayKit's GNOME Shell extension, which tells replayd alone which windows are an app's, is not enabled"
                + (gnomeExtensionProblem.map { " (\($0))" } ?? "")
                + "; enable it with `\(gnomeExtensionEnableCommand)` (installed by `make install`; log out and in again if GNOME does not know it yet)"
        } else {
            lacks = switch desktop.lowercased() {
            case "sway", "wlroots": "sway before 1.12 copies whole outputs only (per-window capture needs ext-image-copy-capture with toplevel sources)"
            case "kde": "KWin's per-window screencast (zkde_screencast_unstable_v1) is not used by replayd yet"
            default: "it offers no per-window capture that replayd can use"
            }
        }
        return "an app's own recordings, captures and broadcasts are unavailable on \(desktop) (Wayland): \(lacks), "
            + "and replayd never cuts an app's windows out of the whole screen"
    }
}
