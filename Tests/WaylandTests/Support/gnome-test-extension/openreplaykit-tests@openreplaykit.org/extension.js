/* Test-only (Tests/WaylandTests, installed by GnomeSession into its private XDG_DATA_HOME, never by
 * `make install`): a Wayland client cannot place its own window, so the tests ask GNOME Shell to.
 * org.openreplaykit.ShellTests1 on the session bus:
 *   Place(title, x, y, width, height) -> found: un-fullscreens/un-maximizes the window titled
 *   `title`, moves and resizes its frame, raises and focuses it.
 *   Describe(title) -> (x, y, width, height, stacking): its frame and its place in the stacking order
 *   (0 = lowest), all -1 when there is no such window. */
const { Gio, GLib, Meta } = imports.gi;

const IFACE = `<node><interface name="org.openreplaykit.ShellTests1">
  <method name="Place">
    <arg type="s" direction="in" name="title"/>
    <arg type="i" direction="in" name="x"/>
    <arg type="i" direction="in" name="y"/>
    <arg type="i" direction="in" name="width"/>
    <arg type="i" direction="in" name="height"/>
    <arg type="b" direction="out" name="found"/>
  </method>
  <method name="Describe">
    <arg type="s" direction="in" name="title"/>
    <arg type="(iiiii)" direction="out" name="frame"/>
  </method>
</interface></node>`;

class PlacementService {
    enable() {
        this._impl = Gio.DBusExportedObject.wrapJSObject(IFACE, this);
        this._impl.export(Gio.DBus.session, '/org/openreplaykit/ShellTests');
        this._nameId = Gio.bus_own_name_on_connection(Gio.DBus.session, 'org.openreplaykit.ShellTests',
            Gio.BusNameOwnerFlags.NONE, null, null);
    }

    disable() {
        this._impl.unexport();
        Gio.bus_unown_name(this._nameId);
    }

    Place(title, x, y, width, height) {
        const window = global.display.list_all_windows().find(w => w.get_title() === title);
        if (!window)
            return false;
        if (window.is_fullscreen())
            window.unmake_fullscreen();
        if (window.get_maximized())
            window.unmaximize(Meta.MaximizeFlags.BOTH);
        window.move_resize_frame(true, x, y, width, height);
        window.raise();
        window.activate(global.get_current_time());
        return true;
    }

    Describe(title) {
        const all = global.display.sort_windows_by_stacking(global.display.list_all_windows());
        const position = all.findIndex(w => w.get_title() === title);
        if (position < 0)
            return [-1, -1, -1, -1, -1];
        const rect = all[position].get_frame_rect();
        return [rect.x, rect.y, rect.width, rect.height, position];
    }
}

function init() {
    return new PlacementService();
}
