#!/usr/bin/python3
"""A typical desktop for make bench on Wayland: a native GTK 4 window (GDK_BACKEND=wayland), fullscreen,
with a terminal-like text view scrolling a line every 100 ms and a spinner turning; the rest still.
desktop.py  (prints "shown" once mapped)"""
import sys, gi
gi.require_version('Gtk', '4.0')
from gi.repository import Gtk, GLib

app = Gtk.Application(application_id='org.openreplaykit.BenchDesktop')

def activate(app):
    win = Gtk.ApplicationWindow(application=app, title='bench desktop')
    box = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=12)
    text = Gtk.TextView(editable=False, monospace=True)
    scroll = Gtk.ScrolledWindow(hexpand=True, vexpand=True)
    scroll.set_child(text)
    side = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=12)
    spinner = Gtk.Spinner(spinning=True)
    spinner.set_size_request(64, 64)
    side.append(spinner)
    side.append(Gtk.Label(label='OpenReplayKit bench: a terminal scrolls, a spinner turns'))
    box.append(scroll)
    box.append(side)
    win.set_child(box)
    buffer = text.get_buffer()
    count = [0]
    def line():
        count[0] += 1
        end = buffer.get_end_iter()
        buffer.insert(end, 'line %06d  build step %d: compiling module %d of 400 ... ok\n' % (count[0], count[0] % 17, count[0] % 400))
        if buffer.get_line_count() > 300:
            start = buffer.get_start_iter()
            second = buffer.get_iter_at_line(1)[1]
            buffer.delete(start, second)
        adj = scroll.get_vadjustment()
        adj.set_value(adj.get_upper())
        return True
    GLib.timeout_add(100, line)
    win.fullscreen()
    win.present()
    GLib.timeout_add(500, lambda: (print('shown', flush=True), False)[1])

app.connect('activate', activate)
sys.exit(app.run([]))
