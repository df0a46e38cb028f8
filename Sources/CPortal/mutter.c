// An app's own windows on GNOME, behind ork_mutter.h: OpenReplayKit's Shell extension for the window
// list, Mutter's ScreenCast for each window's pixels. Signals are subscribed to before the calls
// that cause them, on a private main context that only this file iterates.
#include "ork_mutter.h"
#include "bus.h"

#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

#define SHELL_NAME "org.openreplaykit.Shell"
#define SHELL_PATH "/org/openreplaykit/Shell"
#define SHELL_INTERFACE "org.openreplaykit.Shell1"
#define MUTTER_NAME "org.gnome.Mutter.ScreenCast"
#define MUTTER_PATH "/org/gnome/Mutter/ScreenCast"
#define MUTTER_INTERFACE "org.gnome.Mutter.ScreenCast"

struct ork_gnome_shell {
    int references;              /* the caller's, and one per open cast */
    GMainContext *context;
    GDBusConnection *bus;
    guint changed_subscription;
    int changed;
};

struct ork_mutter_window_cast {
    ork_gnome_shell *shell;
    char *session;
    guint closed_subscription;
    int closed;
    uint32_t node;
};

static void shell_release(ork_gnome_shell *shell)
{
    if (--shell->references > 0)
        return;
    g_main_context_push_thread_default(shell->context);
    if (shell->changed_subscription)
        g_dbus_connection_signal_unsubscribe(shell->bus, shell->changed_subscription);
    if (shell->bus) {
        g_dbus_connection_close_sync(shell->bus, NULL, NULL);
        g_object_unref(shell->bus);
    }
    // Pending callbacks of unsubscribed signals are dropped with the context.
    while (g_main_context_iteration(shell->context, FALSE))
        ;
    g_main_context_pop_thread_default(shell->context);
    g_main_context_unref(shell->context);
    g_free(shell);
}

static void on_windows_changed(GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                               const gchar *signal, GVariant *parameters, gpointer data)
{
    (void)bus; (void)sender; (void)path; (void)interface; (void)signal; (void)parameters;
    ((ork_gnome_shell *)data)->changed = 1;
}

static void dispatch(ork_gnome_shell *shell)
{
    while (g_main_context_iteration(shell->context, FALSE))
        ;
}

ork_gnome_shell *ork_gnome_shell_open(const char *bus_address, char *error, size_t error_size)
{
    ork_gnome_shell *shell = g_new0(ork_gnome_shell, 1);
    shell->references = 1;
    shell->context = g_main_context_new();
    g_main_context_push_thread_default(shell->context);
    // A connection of our own: Mutter ends our sessions when it closes.
    shell->bus = ork_private_session_bus(bus_address, error, error_size);
    if (!shell->bus) {
        g_main_context_pop_thread_default(shell->context);
        shell_release(shell);
        return NULL;
    }
    shell->changed_subscription = g_dbus_connection_signal_subscribe(shell->bus, SHELL_NAME, SHELL_INTERFACE,
        "WindowsChanged", SHELL_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE, on_windows_changed, shell, NULL);
    g_main_context_pop_thread_default(shell->context);
    return shell;
}

/* Calls the extension's `method`; the reply (owned) or NULL with `*status` and a message. */
static GVariant *ask_shell(ork_gnome_shell *shell, const char *method, GVariant *parameters, const GVariantType *reply_type,
                           int timeout_ms, int *status, char *error, size_t error_size)
{
    *status = ORK_GNOME_OK;
    GError *e = NULL;
    g_main_context_push_thread_default(shell->context);
    GVariant *reply = g_dbus_connection_call_sync(shell->bus, SHELL_NAME, SHELL_PATH, SHELL_INTERFACE, method,
        parameters, reply_type, G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout_ms, NULL, &e);
    g_main_context_pop_thread_default(shell->context);
    if (reply)
        return reply;
    gchar *remote = g_dbus_error_get_remote_error(e);
    if (remote && (!strcmp(remote, "org.freedesktop.DBus.Error.ServiceUnknown")
                   || !strcmp(remote, "org.freedesktop.DBus.Error.NameHasNoOwner"))) {
        *status = ORK_GNOME_UNAVAILABLE;
        snprintf(error, error_size, "%s", "OpenReplayKit's GNOME Shell extension does not answer (it is not enabled)");
    } else if (remote && !strcmp(remote, "org.freedesktop.DBus.Error.AccessDenied")) {
        *status = ORK_GNOME_DENIED;
        g_dbus_error_strip_remote_error(e);
        snprintf(error, error_size, "OpenReplayKit's GNOME Shell extension refused: %s", e->message);
    } else {
        *status = ORK_GNOME_FAILED;
        g_dbus_error_strip_remote_error(e);
        snprintf(error, error_size, "OpenReplayKit's GNOME Shell extension did not answer: %s", e->message);
    }
    g_free(remote);
    g_error_free(e);
    return NULL;
}

int ork_gnome_shell_screen_size(ork_gnome_shell *shell, int32_t *width, int32_t *height, int timeout_ms, int *status,
                                char *error, size_t error_size)
{
    GVariant *reply = ask_shell(shell, "ScreenSize", NULL, G_VARIANT_TYPE("(ii)"), timeout_ms, status, error, error_size);
    if (!reply)
        return 0;
    g_variant_get(reply, "(ii)", width, height);
    g_variant_unref(reply);
    return 1;
}

int ork_gnome_shell_windows(ork_gnome_shell *shell, const uint32_t *pids, size_t pid_count, ork_gnome_window *windows,
                            size_t capacity, int timeout_ms, int *status, char *error, size_t error_size)
{
    GVariantBuilder list;
    g_variant_builder_init(&list, G_VARIANT_TYPE("au"));
    for (size_t i = 0; i < pid_count; i++)
        g_variant_builder_add(&list, "u", pids[i]);
    GVariant *reply = ask_shell(shell, "WindowsOfProcesses", g_variant_new("(au)", &list), G_VARIANT_TYPE("(a(tuiiiiub))"),
                                timeout_ms, status, error, error_size);
    if (!reply)
        return -1;
    GVariant *array = g_variant_get_child_value(reply, 0);
    size_t count = g_variant_n_children(array);
    for (size_t i = 0; i < count && i < capacity; i++) {
        gboolean shown = FALSE;
        ork_gnome_window *w = &windows[i];
        g_variant_get_child(array, i, "(tuiiiiub)", &w->id, &w->pid, &w->x, &w->y, &w->width, &w->height,
                            &w->stacking, &shown);
        w->shown = shown ? 1 : 0;
    }
    g_variant_unref(array);
    g_variant_unref(reply);
    return (int)count;
}

int ork_gnome_shell_changed(ork_gnome_shell *shell)
{
    g_main_context_push_thread_default(shell->context);
    dispatch(shell);
    g_main_context_pop_thread_default(shell->context);
    int changed = shell->changed;
    shell->changed = 0;
    return changed;
}

int ork_gnome_shell_running(ork_gnome_shell *shell)
{
    g_main_context_push_thread_default(shell->context);
    GVariant *reply = g_dbus_connection_call_sync(shell->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
        "org.freedesktop.DBus", "NameHasOwner", g_variant_new("(s)", SHELL_NAME), G_VARIANT_TYPE("(b)"),
        G_DBUS_CALL_FLAGS_NONE, 10000, NULL, NULL);
    g_main_context_pop_thread_default(shell->context);
    gboolean owned = FALSE;
    if (reply) {
        g_variant_get(reply, "(b)", &owned);
        g_variant_unref(reply);
    }
    return owned ? 1 : 0;
}

uint32_t ork_mutter_screencast_version(ork_gnome_shell *shell)
{
    g_main_context_push_thread_default(shell->context);
    GVariant *reply = g_dbus_connection_call_sync(shell->bus, MUTTER_NAME, MUTTER_PATH, "org.freedesktop.DBus.Properties",
        "Get", g_variant_new("(ss)", MUTTER_INTERFACE, "Version"), G_VARIANT_TYPE("(v)"), G_DBUS_CALL_FLAGS_NONE, 10000,
        NULL, NULL);
    g_main_context_pop_thread_default(shell->context);
    if (!reply)
        return 0;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    uint32_t version = g_variant_is_of_type(value, G_VARIANT_TYPE_INT32) ? (uint32_t)g_variant_get_int32(value)
                     : g_variant_is_of_type(value, G_VARIANT_TYPE_UINT32) ? g_variant_get_uint32(value) : 0;
    g_variant_unref(value);
    g_variant_unref(reply);
    return version;
}

void ork_gnome_shell_close(ork_gnome_shell *shell)
{
    if (shell)
        shell_release(shell);
}

static void on_session_closed(GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                              const gchar *signal, GVariant *parameters, gpointer data)
{
    (void)bus; (void)sender; (void)path; (void)interface; (void)signal; (void)parameters;
    ork_mutter_window_cast *cast = data;
    cast->closed = 1;
    cast->shell->changed = 1;
}

struct stream_added {
    int done;
    uint32_t node;
};

static void on_stream_added(GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                            const gchar *signal, GVariant *parameters, gpointer data)
{
    (void)bus; (void)sender; (void)path; (void)interface; (void)signal;
    struct stream_added *added = data;
    if (!added->done && g_variant_is_of_type(parameters, G_VARIANT_TYPE("(u)"))) {
        g_variant_get(parameters, "(u)", &added->node);
        added->done = 1;
    }
}

static gboolean on_timeout(gpointer data)
{
    *(int *)data = 1;
    return G_SOURCE_REMOVE;
}

/* A method of the session or stream at `path`; the reply (owned) or NULL with the message set. */
static GVariant *call(ork_mutter_window_cast *cast, const char *path, const char *interface, const char *method,
                      GVariant *parameters, const GVariantType *reply_type, char *error, size_t error_size)
{
    GError *e = NULL;
    GVariant *reply = g_dbus_connection_call_sync(cast->shell->bus, MUTTER_NAME, path, interface, method, parameters,
        reply_type, G_DBUS_CALL_FLAGS_NONE, 10000, NULL, &e);
    if (!reply) {
        g_dbus_error_strip_remote_error(e);
        snprintf(error, error_size, "Mutter's screen cast refused %s: %s", method, e->message);
        g_error_free(e);
    }
    return reply;
}

ork_mutter_window_cast *ork_mutter_window_cast_open(ork_gnome_shell *shell, uint64_t window, int timeout_ms,
                                                    char *error, size_t error_size)
{
    ork_mutter_window_cast *cast = g_new0(ork_mutter_window_cast, 1);
    cast->shell = shell;
    shell->references++;
    g_main_context_push_thread_default(shell->context);
    GVariantBuilder options;
    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    GVariant *reply = call(cast, MUTTER_PATH, MUTTER_INTERFACE, "CreateSession", g_variant_new("(a{sv})", &options),
                           G_VARIANT_TYPE("(o)"), error, error_size);
    guint added_subscription = 0;
    struct stream_added added = { 0 };
    char *stream = NULL;
    if (!reply)
        goto failed;
    g_variant_get(reply, "(o)", &cast->session);
    g_variant_unref(reply);
    cast->closed_subscription = g_dbus_connection_signal_subscribe(shell->bus, MUTTER_NAME,
        "org.gnome.Mutter.ScreenCast.Session", "Closed", cast->session, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
        on_session_closed, cast, NULL);

    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&options, "{sv}", "window-id", g_variant_new_uint64(window));
    g_variant_builder_add(&options, "{sv}", "cursor-mode", g_variant_new_uint32(0));   // hidden: not the app's
    reply = call(cast, cast->session, "org.gnome.Mutter.ScreenCast.Session", "RecordWindow",
                 g_variant_new("(a{sv})", &options), G_VARIANT_TYPE("(o)"), error, error_size);
    if (!reply)
        goto failed;
    g_variant_get(reply, "(o)", &stream);
    g_variant_unref(reply);
    added_subscription = g_dbus_connection_signal_subscribe(shell->bus, MUTTER_NAME, "org.gnome.Mutter.ScreenCast.Stream",
        "PipeWireStreamAdded", stream, NULL, G_DBUS_SIGNAL_FLAGS_NONE, on_stream_added, &added, NULL);
    reply = call(cast, cast->session, "org.gnome.Mutter.ScreenCast.Session", "Start", g_variant_new("()"),
                 G_VARIANT_TYPE("()"), error, error_size);
    if (!reply)
        goto failed;
    g_variant_unref(reply);
    int timed_out = 0;
    GSource *timer = g_timeout_source_new(timeout_ms);
    g_source_set_callback(timer, on_timeout, &timed_out, NULL);
    g_source_attach(timer, shell->context);
    while (!added.done && !timed_out && !cast->closed)
        g_main_context_iteration(shell->context, TRUE);
    g_source_destroy(timer);
    g_source_unref(timer);
    if (!added.done) {
        snprintf(error, error_size, "%s", cast->closed ? "Mutter closed the window's screen cast at once (the window went away?)"
                                                         : "Mutter's screen cast of the window gave no PipeWire stream in time");
        goto failed;
    }
    cast->node = added.node;
    g_dbus_connection_signal_unsubscribe(shell->bus, added_subscription);
    g_free(stream);
    g_main_context_pop_thread_default(shell->context);
    return cast;

failed:
    if (added_subscription)
        g_dbus_connection_signal_unsubscribe(shell->bus, added_subscription);
    g_free(stream);
    g_main_context_pop_thread_default(shell->context);
    ork_mutter_window_cast_close(cast);
    return NULL;
}

uint32_t ork_mutter_window_cast_node(const ork_mutter_window_cast *cast)
{
    return cast->node;
}

int ork_mutter_window_cast_closed(const ork_mutter_window_cast *cast)
{
    return cast->closed;
}

void ork_mutter_window_cast_close(ork_mutter_window_cast *cast)
{
    if (!cast)
        return;
    ork_gnome_shell *shell = cast->shell;
    g_main_context_push_thread_default(shell->context);
    if (cast->closed_subscription)
        g_dbus_connection_signal_unsubscribe(shell->bus, cast->closed_subscription);
    if (cast->session && !cast->closed) {
        GVariant *reply = g_dbus_connection_call_sync(shell->bus, MUTTER_NAME, cast->session,
            "org.gnome.Mutter.ScreenCast.Session", "Stop", g_variant_new("()"), NULL, G_DBUS_CALL_FLAGS_NONE, 5000, NULL, NULL);
        if (reply)
            g_variant_unref(reply);
    }
    g_main_context_pop_thread_default(shell->context);
    g_free(cast->session);
    g_free(cast);
    shell_release(shell);
}
