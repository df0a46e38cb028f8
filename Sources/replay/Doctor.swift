import ArgumentParser
import CPortal
import ReplayIPC
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `replay doctor`: what this desktop lets OpenReplayKit do, what is missing, and the command that fixes it.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Say what works on this desktop (X11 or Wayland), what is missing, and how to fix it.",
        discussion: """
            Checks the session replay runs in: on X11 the display; on Wayland the D-Bus session bus, \
            the desktop's screen-cast portal (xdg-desktop-portal with its GNOME, KDE or wlroots \
            backend), PipeWire and the sound server. Then it says, for the person's recordings and \
            broadcasts and for apps' own sessions, whether they work here and why not. Each missing \
            piece comes with the one command that installs or starts it. Exits 1 when the person's \
            recordings cannot work here.

            Example:
              replay doctor
            """)

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        var lines: [String] = []
        var fixes: [String] = []
        var personCanRecord = false
        switch DesktopSession.current(environment: environment) {
        case nil:
            lines.append("Session: none found (neither WAYLAND_DISPLAY nor DISPLAY is set)")
            fixes.append("run replay inside your desktop session, or pass --display :0 to record an X display")
        case .x11(let display):
            let found = Self.xDisplayExists(display)
            lines.append("Session: X11, display \(display)\(found ? "" : " (no X server answers there)")")
            personCanRecord = found
            lines.append("The person's recordings and broadcasts: \(found ? "yes (XCB)" : "no")")
            lines.append("Apps' own sessions: \(found ? "yes (their windows through Composite, their sound through PulseAudio)" : "no")")
            lines.append("Protected content: windows blank, sound left out")
        case .wayland(let display):
            let desktop = DesktopSession.desktopName(environment: environment)
            lines.append("Session: \(desktop) on Wayland (WAYLAND_DISPLAY=\(display)); XWayland is never used to record it")
            var version: UInt32 = 0, types: UInt32 = 0, cursors: UInt32 = 0
            var message = [CChar](repeating: 0, count: 400)
            let portal = ork_portal_probe(nil, &version, &types, &cursors, &message, message.count) == 1
            if portal {
                let remembers = version >= 4 ? ", remembers the screen you chose" : " (version \(version) cannot remember a choice: it asks every time)"
                lines.append("  ok    screen-cast portal, version \(version)\(types & 1 != 0 ? "" : " (offers no monitor!)")\(remembers)")
            } else {
                lines.append("  MISSING  screen-cast portal: \(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
                fixes.append("apt-get install xdg-desktop-portal \(Self.portalBackend(desktop))   (as root; then log in again)")
            }
            let runtime = environment["XDG_RUNTIME_DIR"] ?? ""
            let pipewire = !runtime.isEmpty && Self.isSocket(runtime + "/" + (environment["PIPEWIRE_REMOTE"] ?? "pipewire-0"))
            lines.append(pipewire ? "  ok    PipeWire" : "  MISSING  PipeWire (no pipewire-0 socket in XDG_RUNTIME_DIR)")
            if !pipewire { fixes.append("apt-get install pipewire wireplumber && systemctl --user enable --now pipewire wireplumber") }
            let pulse = environment["PULSE_SERVER"].map { $0.hasPrefix("unix:") ? Self.isSocket(String($0.dropFirst(5))) : true }
                ?? Self.isSocket(runtime + "/pulse/native")
            lines.append(pulse ? "  ok    sound server (the PulseAudio API, PipeWire's or PulseAudio's)"
                               : "  MISSING  sound server: recordings will have no sound")
            if !pulse { fixes.append("apt-get install pipewire-pulse && systemctl --user enable --now pipewire-pulse") }
            personCanRecord = portal && types & 1 != 0 && pipewire
            lines.append("The person's recordings and broadcasts: \(personCanRecord ? "yes, through the portal (the desktop asks which screen the first time)" : "no, until what is missing above is there")")
            if WaylandSupport.appSessionsPossible(environment: environment) {
                // GNOME: the extension must run (it answers replayd only: here we see whether its name is owned).
                var message = [CChar](repeating: 0, count: 400)
                let shell = ork_gnome_shell_open(nil, &message, message.count)
                defer { ork_gnome_shell_close(shell) }
                let running = shell.map { ork_gnome_shell_running($0) == 1 } ?? false
                let mutter = shell.map { ork_mutter_screencast_version($0) } ?? 0
                lines.append(running ? "  ok    OpenReplayKit's GNOME Shell extension (\(WaylandSupport.gnomeExtensionUUID))"
                                     : "  MISSING  OpenReplayKit's GNOME Shell extension (\(WaylandSupport.gnomeExtensionUUID)) is not enabled")
                lines.append(mutter > 0 ? "  ok    Mutter's screen cast, version \(mutter)" : "  MISSING  Mutter's screen cast (org.gnome.Mutter.ScreenCast) does not answer")
                if !running { fixes.append(WaylandSupport.gnomeExtensionEnableCommand + "   (installed by `make install`; log out and in again if GNOME does not know it yet)") }
                lines.append(running && mutter > 0
                    ? "Apps' own sessions: yes, each app's own windows through the extension and Mutter's per-window screen cast (GNOME shows its screencast indicator)"
                    : "Apps' own sessions: no: \(WaylandSupport.appSessionsUnavailable(environment: environment))")
            } else {
                lines.append("Apps' own sessions: no: \(WaylandSupport.appSessionsUnavailable(environment: environment))")
            }
            lines.append("Protected content: protected sound is left out of every session; protected windows are not yet blanked in the person's Wayland recordings (no Wayland protocol names a window to leave out)")
        }
        for line in lines { print(line) }
        if !fixes.isEmpty {
            print("To fix:")
            for fix in fixes { print("  \(fix)") }
        }
        if !personCanRecord { throw ExitCode(1) }
    }

    static func portalBackend(_ desktop: String) -> String {
        switch desktop.lowercased() {
        case "gnome", "ubuntu": "xdg-desktop-portal-gnome"
        case "kde": "xdg-desktop-portal-kde"
        case "sway", "wlroots", "hyprland", "river": "xdg-desktop-portal-wlr"
        default: "xdg-desktop-portal-gtk"
        }
    }

    static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK
    }

    static func xDisplayExists(_ display: String) -> Bool {
        guard display.hasPrefix(":") else { return true }
        let number = display.dropFirst().split(separator: ".").first.map(String.init) ?? ""
        return Int(number) != nil && FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)")
    }
}
