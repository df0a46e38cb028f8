#!/usr/bin/python3
"""Stops the screen sharing the way a person does on GNOME 43: finds GNOME Shell's own
"Stop Screen Sharing" button in the top bar through AT-SPI and clicks it with a pointer.

    stop-sharing.py [--timeout SECONDS]

GNOME Shell 43 puts its St widgets on the accessibility bus (measured: whatever
`org.gnome.desktop.interface toolkit-accessibility` says, as gnome-shell loads the AT-SPI bridge at
start). The indicator (ScreenSharingIndicator in
js/ui/status/remoteAccess.js) is a push button named "Stop Screen Sharing" that stops every sharing
handle on a button press (its vfunc_event), but offers AT-SPI no action to do (its action list is
empty), and at-spi2-core 2.46 synthesises pointer events through XTest only, which a Wayland
session without X has not (Atspi.generate_mouse_event answers True and nothing happens). So the
button is found, and its place read, through AT-SPI, and the click is a pointer's: a virtual
pointer of Mutter's RemoteDesktop API (a person's remote mouse), moved to the button's centre,
pressed and released; the press goes through Clutter's event handling to the indicator as a real
mouse's would.

The button is in the top bar: the top bar must show (with a fullscreen window, show the overview
first). The remote desktop session is one more sharing handle, so the same press ends it too.

Run it with the session's environment (DBUS_SESSION_BUS_ADDRESS). Exits 0 after the click and prints
what it found and did; exits 1 with what it saw on standard error."""
import argparse
import sys
import time
import warnings

import gi
gi.require_version('Atspi', '2.0')
from gi.repository import Atspi, Gio, GLib
from accessible import log, children, name

warnings.filterwarnings('ignore', category=DeprecationWarning)

BUTTON = 'Stop Screen Sharing'
RD = 'org.gnome.Mutter.RemoteDesktop'
SC = 'org.gnome.Mutter.ScreenCast'
BTN_LEFT = 0x110


def states(node):
    try:
        return {Atspi.StateType(s).value_nick for s in node.get_state_set().get_states()}
    except (GLib.Error, ValueError):
        return set()


def shell():
    for app in children(Atspi.get_desktop(0)):
        if name(app) == 'gnome-shell':
            return app
    return None


def find_button(root):
    """The showing "Stop Screen Sharing" push button; only subtrees that show are walked."""
    stack = [root]
    while stack:
        node = stack.pop()
        try:
            if node.get_role() == Atspi.Role.PUSH_BUTTON and name(node) == BUTTON:
                return node if 'showing' in states(node) else None
        except GLib.Error:
            continue
        stack.extend(child for child in children(node) if 'showing' in states(child))
    return None


def centre(button):
    component = button.get_component_iface()
    if component is None:
        return None
    extents = component.get_extents(Atspi.CoordType.SCREEN)
    if extents.width <= 0 or extents.height <= 0 or extents.x < 0 or extents.y < 0:
        return None
    return extents, (extents.x + extents.width / 2, extents.y + extents.height / 2)


def click(x, y):
    """A left click at (x, y) with a virtual pointer of Mutter's RemoteDesktop API. Absolute
    motion needs a stream of the monitor tied to the remote desktop session."""
    bus = Gio.bus_get_sync(Gio.BusType.SESSION)

    def call(destination, path, interface, method, arguments=None, reply=None):
        return bus.call_sync(destination, path, interface, method, arguments,
                             GLib.VariantType(reply) if reply else None, Gio.DBusCallFlags.NONE, 10000, None)

    (session,) = call(RD, '/org/gnome/Mutter/RemoteDesktop', RD, 'CreateSession', None, '(o)').unpack()
    (identifier,) = call(RD, session, 'org.freedesktop.DBus.Properties', 'Get',
                         GLib.Variant('(ss)', (RD + '.Session', 'SessionId')), '(v)').unpack()
    (cast,) = call(SC, '/org/gnome/Mutter/ScreenCast', SC, 'CreateSession',
                   GLib.Variant('(a{sv})', ({'remote-desktop-session-id': GLib.Variant('s', identifier)},)), '(o)').unpack()
    (stream,) = call(SC, cast, SC + '.Session', 'RecordMonitor', GLib.Variant('(sa{sv})', ('', {})), '(o)').unpack()
    call(RD, session, RD + '.Session', 'Start')
    time.sleep(0.3)   # the virtual devices are added to the seat
    call(RD, session, RD + '.Session', 'NotifyPointerMotionAbsolute', GLib.Variant('(sdd)', (stream, x, y)))
    time.sleep(0.2)
    call(RD, session, RD + '.Session', 'NotifyPointerButton', GLib.Variant('(ib)', (BTN_LEFT, True)))
    # The press stopped every sharing handle, this remote desktop session among them: the release
    # and the stop may find it gone.
    time.sleep(0.05)
    for method, arguments in (('NotifyPointerButton', GLib.Variant('(ib)', (BTN_LEFT, False))), ('Stop', None)):
        try:
            call(RD, session, RD + '.Session', method, arguments)
        except GLib.Error as error:
            print('%s: %s' % (method, error.message.split(': ')[-1]), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--timeout', type=float, default=20, help='seconds to wait for the button to show')
    args = parser.parse_args()

    began = time.monotonic()
    deadline = began + args.timeout
    found = None
    while time.monotonic() < deadline:
        root = shell()
        button = find_button(root) if root is not None else None
        found = centre(button) if button is not None else None
        if found:
            break
        time.sleep(0.3)
    if not found:
        root = shell()
        log('no showing "%s" button with a place on screen in %.0f s (gnome-shell on the accessibility bus: %s); '
            'is the top bar shown, a screen shared?'
            % (BUTTON, args.timeout, root is not None))
        sys.exit(1)
    extents, (x, y) = found
    print('found "%s" at %d,%d %dx%d after %.1f s' % (BUTTON, extents.x, extents.y, extents.width, extents.height,
                                                     time.monotonic() - began), flush=True)
    try:
        click(x, y)
    except GLib.Error as error:
        log('the click failed:', error.message)
        sys.exit(1)
    print('clicked at %.0f,%.0f' % (x, y), flush=True)


if __name__ == '__main__':
    main()
