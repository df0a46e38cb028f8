#include "CGtkShim.h"
#include <gdk/x11/gdkx.h>
#include <X11/Xatom.h>

#if !GTK_CHECK_VERSION(4, 8, 0)
#error "OpenReplayKit's system windows need GTK 4.8 or newer (Debian 12: libgtk-4-dev)"
#endif

// Each typed handler travels as a GCallback (G_CALLBACK's cast): function pointers of one size.
_Static_assert(sizeof(ork_gtk_void_handler) == sizeof(GCallback), "handler pointers are GCallback-sized");
_Static_assert(sizeof(ork_gtk_key_handler) == sizeof(GCallback), "handler pointers are GCallback-sized");
_Static_assert(sizeof(gboolean) == sizeof(int), "gboolean is the C int Swift sees as Int32");
// ReplayGtk's KeyModifiers spells GDK 4's modifier bits as numbers: the enum's constants are not
// always visible to Swift (a release build lost them when gtk.h's declarations went to another module).
_Static_assert(GDK_SHIFT_MASK == 1 << 0 && GDK_CONTROL_MASK == 1 << 2 && GDK_ALT_MASK == 1 << 3, "GDK 4's modifier bits");
_Static_assert(sizeof(long) == 8, "EWMH client messages carry 32-bit values in longs (LP64 assumed)");

#define ORK_CONNECT(instance, signal, handler, data, destroy) \
    g_signal_connect_data((instance), (signal), G_CALLBACK(handler), (data), (destroy), (GConnectFlags)0)

gulong ork_gtk_connect_void(gpointer instance, const char *signal, ork_gtk_void_handler handler, gpointer data, GClosureNotify destroy) {
    return ORK_CONNECT(instance, signal, handler, data, destroy);
}
gulong ork_gtk_connect_notify(gpointer instance, const char *signal, ork_gtk_notify_handler handler, gpointer data, GClosureNotify destroy) {
    return ORK_CONNECT(instance, signal, handler, data, destroy);
}
gulong ork_gtk_connect_bool(gpointer instance, const char *signal, ork_gtk_bool_handler handler, gpointer data, GClosureNotify destroy) {
    return ORK_CONNECT(instance, signal, handler, data, destroy);
}
gulong ork_gtk_connect_key(gpointer instance, const char *signal, ork_gtk_key_handler handler, gpointer data, GClosureNotify destroy) {
    return ORK_CONNECT(instance, signal, handler, data, destroy);
}
gulong ork_gtk_connect_response(gpointer instance, const char *signal, ork_gtk_response_handler handler, gpointer data, GClosureNotify destroy) {
    return ORK_CONNECT(instance, signal, handler, data, destroy);
}
gulong ork_gtk_connect_change_value(gpointer instance, const char *signal, ork_gtk_change_value_handler handler, gpointer data, GClosureNotify destroy) {
    return ORK_CONNECT(instance, signal, handler, data, destroy);
}
gulong ork_gtk_connect_point(gpointer instance, const char *signal, ork_gtk_point_handler handler, gpointer data, GClosureNotify destroy) {
    return ORK_CONNECT(instance, signal, handler, data, destroy);
}

gboolean ork_gtk_is_x11_surface(GdkSurface *surface) {
    return surface != NULL && GDK_IS_X11_SURFACE(surface);
}

unsigned long ork_gtk_x11_xid(GdkSurface *surface) {
    return ork_gtk_is_x11_surface(surface) ? (unsigned long)gdk_x11_surface_get_xid(surface) : 0;
}

gboolean ork_gtk_x11_keep_above(GdkSurface *surface) {
    if (!ork_gtk_is_x11_surface(surface)) return FALSE;
    GdkDisplay *display = gdk_surface_get_display(surface);
    Display *xdisplay = gdk_x11_display_get_xdisplay(display);
    Window xid = gdk_x11_surface_get_xid(surface);
    Atom state = gdk_x11_get_xatom_by_name_for_display(display, "_NET_WM_STATE");
    Atom above = gdk_x11_get_xatom_by_name_for_display(display, "_NET_WM_STATE_ABOVE");
    Atom type = gdk_x11_get_xatom_by_name_for_display(display, "_NET_WM_WINDOW_TYPE");
    Atom dialog = gdk_x11_get_xatom_by_name_for_display(display, "_NET_WM_WINDOW_TYPE_DIALOG");
    XChangeProperty(xdisplay, xid, type, XA_ATOM, 32, PropModeReplace, (unsigned char *)&dialog, 1);
    // Before the window manager manages the window it reads the property; after, it takes a request.
    XChangeProperty(xdisplay, xid, state, XA_ATOM, 32, PropModeAppend, (unsigned char *)&above, 1);
    XClientMessageEvent event = {0};
    event.type = ClientMessage;
    event.window = xid;
    event.message_type = state;
    event.format = 32;
    event.data.l[0] = 1; // _NET_WM_STATE_ADD
    event.data.l[1] = (long)above;
    event.data.l[2] = 0;
    event.data.l[3] = 1; // a normal application
    XSendEvent(xdisplay, DefaultRootWindow(xdisplay), False,
               SubstructureRedirectMask | SubstructureNotifyMask, (XEvent *)&event);
    XFlush(xdisplay);
    return TRUE;
}
