#!/usr/bin/python3
"""A native Wayland GTK 4 window filled with one colour, fullscreen on the monitor (or maximized):
    colour-window.py R G B [--title TITLE] [--maximized] [--then R G B]
R, G and B are 0-255. Prints "shown WIDTHxHEIGHT" once the window has drawn itself at its final size,
then runs until killed. With --then, SIGUSR1 turns the window to that colour (drawn at once; printed
as "changed")."""
import argparse
import os
import signal
import sys

# A Wayland client, never an X11 one (no Xwayland in the tests' session); cairo: no GPU here.
os.environ['GDK_BACKEND'] = 'wayland'
os.environ.setdefault('GSK_RENDERER', 'cairo')

import gi
gi.require_version('Gtk', '4.0')
gi.require_version('Gdk', '4.0')
from gi.repository import Gdk, GLib, Gtk

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('rgb', type=int, nargs=3, metavar='R G B')
parser.add_argument('--title', default='colour')
parser.add_argument('--maximized', action='store_true', help='maximized instead of fullscreen (the top bar shows)')
parser.add_argument('--then', type=int, nargs=3, metavar=('R', 'G', 'B'), help='the colour SIGUSR1 turns it to')
args = parser.parse_args()
r, g, b = args.rgb


def style(rgb):
    return ('window, window * { background: rgb(%d,%d,%d); }' % tuple(rgb)).encode()


def activate(app):
    css = Gtk.CssProvider()
    css.load_from_data(style((r, g, b)))
    Gtk.StyleContext.add_provider_for_display(Gdk.Display.get_default(), css, Gtk.STYLE_PROVIDER_PRIORITY_USER)
    if args.then:
        def change():
            css.load_from_data(style(args.then))
            print('changed to %d %d %d' % tuple(args.then), flush=True)
            return GLib.SOURCE_CONTINUE
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, change)
    window = Gtk.ApplicationWindow(application=app, title=args.title)
    window.set_decorated(False)
    if args.maximized:
        window.maximize()
    else:
        window.fullscreen()
    reported = []

    def check():
        # Drawn at the size the compositor gave (fullscreen or maximized), not the first size.
        width, height = window.get_width(), window.get_height()
        state = window.is_fullscreen() if not args.maximized else window.is_maximized()
        if state and width > 200 and not reported:
            reported.append(True)
            print('shown %dx%d on %s' % (width, height, type(Gdk.Display.get_default()).__name__), flush=True)
            return GLib.SOURCE_REMOVE
        return GLib.SOURCE_CONTINUE

    GLib.timeout_add(100, check)
    window.present()


app = Gtk.Application(application_id='org.openreplaykit.test.colour', flags=0)
app.connect('activate', activate)
sys.exit(app.run([]))
