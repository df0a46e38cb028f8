#ifndef CGTKSHIM_H
#define CGTKSHIM_H
// GTK 4 glue Swift cannot express: g_signal_connect is a macro over g_signal_connect_data whose
// handler is the untyped GCallback (G_CALLBACK is a cast), and the X11 window-manager hints GTK 4
// no longer offers (keep above). One typed connect function per handler shape, so that Swift never
// casts function pointers itself. Every name is `ork_gtk_`.
#include <gtk/gtk.h>

/// `void handler(GObject *instance, gpointer data)`: "clicked", "map", "destroy", "value-changed".
typedef void (*ork_gtk_void_handler)(gpointer instance, gpointer data);
/// `void handler(GObject *instance, GParamSpec *property, gpointer data)`: "notify::…".
typedef void (*ork_gtk_notify_handler)(gpointer instance, GParamSpec *property, gpointer data);
/// `gboolean handler(GObject *instance, gpointer data)`: "close-request" (TRUE stops the default).
typedef gboolean (*ork_gtk_bool_handler)(gpointer instance, gpointer data);
/// GtkEventControllerKey "key-pressed": TRUE when the key was handled.
typedef gboolean (*ork_gtk_key_handler)(gpointer controller, guint keyval, guint keycode, GdkModifierType state, gpointer data);
/// GtkNativeDialog "response".
typedef void (*ork_gtk_response_handler)(gpointer dialog, gint response, gpointer data);
/// GtkRange "change-value": the scroll type and the value the person asked for; TRUE stops the default.
typedef gboolean (*ork_gtk_change_value_handler)(gpointer range, GtkScrollType scroll, gdouble value, gpointer data);
/// GtkGestureDrag "drag-begin" / "drag-update" / "drag-end": a point or an offset.
typedef void (*ork_gtk_point_handler)(gpointer gesture, gdouble x, gdouble y, gpointer data);

gulong ork_gtk_connect_void(gpointer instance, const char *signal, ork_gtk_void_handler handler, gpointer data, GClosureNotify destroy);
gulong ork_gtk_connect_notify(gpointer instance, const char *signal, ork_gtk_notify_handler handler, gpointer data, GClosureNotify destroy);
gulong ork_gtk_connect_bool(gpointer instance, const char *signal, ork_gtk_bool_handler handler, gpointer data, GClosureNotify destroy);
gulong ork_gtk_connect_key(gpointer instance, const char *signal, ork_gtk_key_handler handler, gpointer data, GClosureNotify destroy);
gulong ork_gtk_connect_response(gpointer instance, const char *signal, ork_gtk_response_handler handler, gpointer data, GClosureNotify destroy);
gulong ork_gtk_connect_change_value(gpointer instance, const char *signal, ork_gtk_change_value_handler handler, gpointer data, GClosureNotify destroy);
gulong ork_gtk_connect_point(gpointer instance, const char *signal, ork_gtk_point_handler handler, gpointer data, GClosureNotify destroy);

/// Whether `surface` is an X11 surface (GDK_IS_X11_SURFACE, a type-check macro).
gboolean ork_gtk_is_x11_surface(GdkSurface *surface);
/// The X11 window id of `surface`, 0 when it is not an X11 surface.
unsigned long ork_gtk_x11_xid(GdkSurface *surface);
/// Asks the window manager (EWMH `_NET_WM_STATE_ABOVE`) to keep `surface` above other windows, and
/// marks it a dialog (`_NET_WM_WINDOW_TYPE_DIALOG`). FALSE when `surface` is not on X11.
gboolean ork_gtk_x11_keep_above(GdkSurface *surface);

#endif
