#!/usr/bin/python3
"""A native Wayland GTK 4 window of one colour and a given size, not fullscreen (the tests place it
through the test Shell extension):  app-window.py R G B --title TITLE [--size WxH]
Prints "shown WIDTHxHEIGHT" once drawn, then runs until killed."""
import argparse
import os
import sys

os.environ['GDK_BACKEND'] = 'wayland'
os.environ.setdefault('GSK_RENDERER', 'cairo')

import gi
gi.require_version('Gtk', '4.0')
gi.require_version('Gdk', '4.0')
from gi.repository import Gdk, GLib, Gtk

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('rgb', type=int, nargs=3, metavar='R G B')
parser.add_argument('--title', required=True)
parser.add_argument('--size', default='640x480')
args = parser.parse_args()
width, height = (int(v) for v in args.size.split('x'))


def activate(app):
    css = Gtk.CssProvider()
    css.load_from_data(('window, window * { background: rgb(%d,%d,%d); }' % tuple(args.rgb)).encode())
    Gtk.StyleContext.add_provider_for_display(Gdk.Display.get_default(), css, Gtk.STYLE_PROVIDER_PRIORITY_USER)
    window = Gtk.ApplicationWindow(application=app, title=args.title)
    window.set_decorated(False)
    window.set_default_size(width, height)

    def check():
        if window.get_width() > 100:
            print('shown %dx%d' % (window.get_width(), window.get_height()), flush=True)
            return GLib.SOURCE_REMOVE
        return GLib.SOURCE_CONTINUE

    GLib.timeout_add(100, check)
    window.present()


# Each window its own application (two instances must not merge into one process's window).
app = Gtk.Application(application_id=None, flags=0)
app.connect('activate', activate)
sys.exit(app.run([]))
