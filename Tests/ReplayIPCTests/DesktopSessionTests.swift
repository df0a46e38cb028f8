import Testing
@testable import ReplayIPC

/// Which desktop a request names, and where the person's screen-sharing choice is kept.
@Suite struct DesktopSessionTests {
    @Test func waylandWinsOverItsXWayland() {
        // GNOME and KDE set DISPLAY for XWayland beside WAYLAND_DISPLAY: XWayland is never what is recorded.
        let gnome = ["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0", "XDG_CURRENT_DESKTOP": "GNOME"]
        #expect(DesktopSession.current(environment: gnome) == .wayland(display: "wayland-0"))
        #expect(DesktopSession.current(environment: gnome)?.displayName == "wayland:wayland-0")
        // A session that says it is X11 (an X session started from a Wayland one) is X11.
        #expect(DesktopSession.current(environment: ["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":1", "XDG_SESSION_TYPE": "x11"]) == .x11(display: ":1"))
        #expect(DesktopSession.current(environment: ["DISPLAY": ":0"]) == .x11(display: ":0"))
        #expect(DesktopSession.current(environment: ["DISPLAY": "", "WAYLAND_DISPLAY": ""]) == nil)
    }

    @Test func displayNamesRoundTrip() {
        #expect(DesktopSession(displayName: "wayland:wayland-1") == .wayland(display: "wayland-1"))
        #expect(DesktopSession(displayName: ":0")?.isWayland == false)
        #expect(DesktopSession(displayName: "") == nil)
        #expect(DesktopSession(displayName: "wayland:") == .wayland(display: "wayland-0"))
    }

    @Test func appSessionsAreRefusedWithTheDesktopsReason() {
        let sway = WaylandSupport.appSessionsUnavailable(environment: ["XDG_CURRENT_DESKTOP": "sway"])
        #expect(sway.contains("sway") && sway.contains("1.12") && sway.contains("never cuts"))
        let gnome = WaylandSupport.appSessionsUnavailable(environment: ["XDG_CURRENT_DESKTOP": "GNOME"])
        #expect(gnome.contains("GNOME Shell"))
        // GNOME: the extension is what is missing, and the one command that enables it.
        #expect(gnome.contains("gnome-extensions enable openreplaykit@openreplaykit.org") && gnome.contains("never cuts"))
        #expect(WaylandSupport.appSessionsPossible(environment: ["XDG_CURRENT_DESKTOP": "ubuntu:GNOME"]))
        #expect(!WaylandSupport.appSessionsPossible(environment: ["XDG_CURRENT_DESKTOP": "sway"]))
        #expect(!WaylandSupport.appSessionsPossible(environment: ["XDG_CURRENT_DESKTOP": "KDE"]))
    }

    @Test func theRestoreTokenLivesInTheStateFolder() {
        #expect(StatePaths.portalRestoreToken(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"]) == "/s/openreplaykit/portal-restore-token")
        #expect(StatePaths.portalRestoreToken(environment: ["HOME": "/h"]) == "/h/.local/state/openreplaykit/portal-restore-token")
        // A relative XDG_STATE_HOME is ignored, as the XDG spec says.
        #expect(StatePaths.portalRestoreToken(environment: ["XDG_STATE_HOME": "rel", "HOME": "/h"]) == "/h/.local/state/openreplaykit/portal-restore-token")
    }
}
