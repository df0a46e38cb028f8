#!/usr/bin/python3
"""GNOME Shell's own screen recorder (org.gnome.Shell.Screencast, what Ctrl+Shift+Alt+R starts), driven
from one D-Bus connection that stays open while it records: the recorder stops when its caller leaves.
gnome-recorder.py FILE SECONDS  -- prints "recording" once started, "stopped" at the end; exit 1 on failure."""
import sys, time
from gi.repository import Gio, GLib

path, seconds = sys.argv[1], float(sys.argv[2])
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
def call(method, args, reply):
    return bus.call_sync('org.gnome.Shell.Screencast', '/org/gnome/Shell/Screencast', 'org.gnome.Shell.Screencast',
                         method, args, GLib.VariantType(reply), Gio.DBusCallFlags.NONE, 30000, None).unpack()
ok, used = call('Screencast', GLib.Variant('(sa{sv})', (path, {})), '(bs)')
if not ok:
    sys.exit('GNOME Shell\'s recorder did not start')
print('recording', used, flush=True)
time.sleep(seconds)
(stopped,) = call('StopScreencast', None, '(b)')
print('stopped' if stopped else 'it had stopped by itself', flush=True)
sys.exit(0 if stopped else 1)
