/* OpenReplayKit's GNOME Shell extension, GNOME 45 and later (ES modules; 43/44 in dist/gnome-shell/).
 * The same service as the 43/44 build: owns org.openreplaykit.Shell on the session bus and exports
 * org.openreplaykit.Shell1 at /org/openreplaykit/Shell, answering only replayd.
 * Not tested on a GNOME 45+ shell here (the test machine has GNOME Shell 43). */
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';

const BUS_NAME = 'org.openreplaykit.Shell';
const OBJECT_PATH = '/org/openreplaykit/Shell';
const IFACE = `<node>
  <interface name="org.openreplaykit.Shell1">
    <!-- The windows of processes PIDS, bottom to top: (Mutter window id for ScreenCast's RecordWindow
         "window-id", pid, frame x, y, width, height in stage pixels, stacking position (0 = lowest of
         all windows), shown (mapped, not minimized, on the active workspace)). Only replayd may ask. -->
    <method name="WindowsOfProcesses">
      <arg type="au" direction="in" name="pids"/>
      <arg type="a(tuiiiiub)" direction="out" name="windows"/>
    </method>
    <!-- The size of the stage (all monitors; with one monitor, the monitor): the canvas the windows'
         frame rectangles are on. Only replayd may ask. -->
    <method name="ScreenSize">
      <arg type="i" direction="out" name="width"/>
      <arg type="i" direction="out" name="height"/>
    </method>
    <!-- A window of a process asked about opened, closed, moved, was resized, restacked, minimized
         or shown again: ask again. It carries nothing about any window. -->
    <signal name="WindowsChanged"/>
  </interface>
</node>`;
/* The only executable answered: OpenReplayKit's per-user daemon. */
const ALLOWED_EXECUTABLE = 'replayd';

/* Answers replayd which windows belong to a set of processes (Meta.Window.get_pid() is the kernel's
 * word for Wayland clients: wl_client_get_credentials), and tells it when they change. Every caller
 * is checked: its pid from the bus (GetConnectionUnixProcessID), then /proc/PID/exe's name; any
 * other program gets AccessDenied, as GNOME's own Introspect refuses ordinary clients. */
class WindowService {
    enable() {
        this._allowed = new Map();   // unique bus name -> true (unique names are never reused)
        this._watched = new Set();   // pids replayd last asked about
        this._windowSignals = new Map();
        this._pending = 0;
        this._impl = Gio.DBusExportedObject.wrapJSObject(IFACE, this);
        this._impl.export(Gio.DBus.session, OBJECT_PATH);
        this._nameId = Gio.bus_own_name_on_connection(Gio.DBus.session, BUS_NAME,
            Gio.BusNameOwnerFlags.NONE, null, null);
        this._displaySignals = [
            global.display.connect('window-created', (_display, window) => this._track(window, true)),
            global.display.connect('restacked', () => this._changedIfWatched(null)),
        ];
        for (const window of global.display.list_all_windows())
            this._track(window, false);
    }

    disable() {
        for (const id of this._displaySignals)
            global.display.disconnect(id);
        for (const [window, ids] of this._windowSignals) {
            for (const id of ids)
                window.disconnect(id);
        }
        this._windowSignals.clear();
        if (this._pending) {
            GLib.source_remove(this._pending);
            this._pending = 0;
        }
        this._impl.unexport();
        Gio.bus_unown_name(this._nameId);
        this._impl = null;
        this._allowed = null;
        this._watched = null;
    }

    _track(window, isNew) {
        if (this._windowSignals.has(window))
            return;
        const changed = () => this._changedIfWatched(window);
        this._windowSignals.set(window, [
            window.connect('position-changed', changed),
            window.connect('size-changed', changed),
            window.connect('notify::minimized', changed),
            window.connect('shown', changed),
            window.connect('unmanaged', () => {
                changed();
                const ids = this._windowSignals.get(window) ?? [];
                for (const id of ids)
                    window.disconnect(id);
                this._windowSignals.delete(window);
            }),
        ]);
        // A new window of an unknown pid may be a child of the app: replayd decides, so say it.
        if (isNew)
            this._changedIfWatched(null);
    }

    /* Coalesced: one signal per main-loop turn at most. `window` null: any change of the stacking
     * or a new window (replayd asks again and finds out whether it was one of the app's). */
    _changedIfWatched(window) {
        if (!this._impl || this._watched.size === 0)
            return;
        if (window && !this._watched.has(window.get_pid()))
            return;
        if (this._pending)
            return;
        this._pending = GLib.idle_add(GLib.PRIORITY_DEFAULT, () => {
            this._pending = 0;
            this._impl?.emit_signal('WindowsChanged', null);
            return GLib.SOURCE_REMOVE;
        });
    }

    WindowsOfProcessesAsync(parameters, invocation) {
        const [pids] = parameters;
        this._checkCaller(invocation, () => {
            this._watched = new Set(pids);
            invocation.return_value(new GLib.Variant('(a(tuiiiiub))', [this._windowsOf(this._watched)]));
        });
    }

    ScreenSizeAsync(_parameters, invocation) {
        this._checkCaller(invocation, () => {
            const [width, height] = global.display.get_size();
            invocation.return_value(new GLib.Variant('(ii)', [width, height]));
        });
    }

    _windowsOf(wanted) {
        const workspace = global.workspace_manager.get_active_workspace();
        const all = global.display.sort_windows_by_stacking(global.display.list_all_windows());
        const result = [];
        all.forEach((window, position) => {
            if (!wanted.has(window.get_pid()))
                return;
            const rect = window.get_frame_rect();
            const actor = window.get_compositor_private();
            const shown = !!actor && actor.visible && !window.minimized &&
                (window.is_on_all_workspaces() || window.get_workspace() === workspace);
            result.push([window.get_id(), window.get_pid(), rect.x, rect.y, rect.width, rect.height, position, shown]);
        });
        return result;
    }

    /* Runs `answer` when the caller is replayd, else returns AccessDenied. */
    _checkCaller(invocation, answer) {
        const sender = invocation.get_sender();
        if (this._allowed.has(sender)) {
            answer();
            return;
        }
        const deny = why => invocation.return_dbus_error('org.freedesktop.DBus.Error.AccessDenied',
            `OpenReplayKit's window list answers only replayd: ${why}`);
        Gio.DBus.session.call('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus',
            'GetConnectionUnixProcessID', new GLib.Variant('(s)', [sender]), new GLib.VariantType('(u)'),
            Gio.DBusCallFlags.NONE, -1, null, (connection, result) => {
                let pid;
                try {
                    [pid] = connection.call_finish(result).deep_unpack();
                } catch (e) {
                    deny(`the bus does not say which process ${sender} is`);
                    return;
                }
                let executable = '';
                try {
                    executable = GLib.file_read_link(`/proc/${pid}/exe`);
                } catch (e) {
                    deny(`cannot read which program process ${pid} runs`);
                    return;
                }
                const name = GLib.path_get_basename(executable.replace(/ \(deleted\)$/, ''));
                if (name !== ALLOWED_EXECUTABLE) {
                    deny(`process ${pid} runs ${name}`);
                    return;
                }
                if (this._allowed) {
                    this._allowed.set(sender, true);
                    answer();
                }
            });
    }
}

export default class OpenReplayKitExtension extends Extension {
    enable() {
        this._service = new WindowService();
        this._service.enable();
    }

    disable() {
        this._service?.disable();
        this._service = null;
    }
}
