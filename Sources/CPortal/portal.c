// The xdg-desktop-portal ScreenCast client behind ork_portal.h: GVariant building and signal
// callbacks are easier to keep right in C than through Swift closures. Each request's Response
// signal is subscribed to before the call (the portal may answer at once), on a private main context
// that only this file iterates.
#include "ork_portal.h"
#include "bus.h"

#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PORTAL_NAME "org.freedesktop.portal.Desktop"
#define PORTAL_PATH "/org/freedesktop/portal/desktop"
#define SCREENCAST "org.freedesktop.portal.ScreenCast"

struct ork_portal_cast {
    GMainContext *context;
    GDBusConnection *bus;
    char *session;
    guint closed_subscription;
    int closed;
    uint32_t node;
    int32_t width, height;
    int fd;
    char *token;
};

struct response {
    int done;
    guint32 code;
    GVariant *results;
};

static void on_response(GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                        const gchar *signal, GVariant *parameters, gpointer data)
{
    struct response *r = data;
    (void)bus; (void)sender; (void)path; (void)interface; (void)signal;
    if (r->done)
        return;
    g_variant_get(parameters, "(u@a{sv})", &r->code, &r->results);
    r->done = 1;
}

static void on_closed(GDBusConnection *bus, const gchar *sender, const gchar *path, const gchar *interface,
                      const gchar *signal, GVariant *parameters, gpointer data)
{
    (void)bus; (void)sender; (void)path; (void)interface; (void)signal; (void)parameters;
    ((struct ork_portal_cast *)data)->closed = 1;
}

static gboolean on_timeout(gpointer data)
{
    *(int *)data = 1;
    return G_SOURCE_REMOVE;
}

static void fail(int *status, int code, char *error, size_t size, const char *format, const char *detail)
{
    *status = code;
    snprintf(error, size, format, detail ? detail : "");
}

/* Calls `method` with `parameters` (its options already hold handle_token = `token`) and waits for
 * the request's Response. Returns the results (owned) or NULL with the status and message set. */
static GVariant *request(struct ork_portal_cast *c, const char *method, GVariant *parameters, const char *token,
                         int timeout_ms, int *status, char *error, size_t size)
{
    gchar *sender = g_strdup(g_dbus_connection_get_unique_name(c->bus) + 1);
    for (gchar *p = sender; *p; p++)
        if (*p == '.') *p = '_';
    gchar *path = g_strdup_printf(PORTAL_PATH "/request/%s/%s", sender, token);
    g_free(sender);
    struct response r = { 0 };
    guint subscription = g_dbus_connection_signal_subscribe(c->bus, PORTAL_NAME, "org.freedesktop.portal.Request",
        "Response", path, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
        on_response, &r, NULL);
    GError *e = NULL;
    GVariant *handle = g_dbus_connection_call_sync(c->bus, PORTAL_NAME, PORTAL_PATH, SCREENCAST, method, parameters,
        G_VARIANT_TYPE("(o)"), G_DBUS_CALL_FLAGS_NONE, 30000, NULL, &e);
    GVariant *results = NULL;
    if (!handle) {
        char what[300];
        snprintf(what, sizeof what, "%s: %s", method, e->message);
        fail(status, ORK_PORTAL_FAILED, error, size, "the screen-cast portal refused %s", what);
        g_error_free(e);
        goto out;
    }
    g_variant_unref(handle);
    int timed_out = 0;
    GSource *timer = g_timeout_source_new(timeout_ms);
    g_source_set_callback(timer, on_timeout, &timed_out, NULL);
    g_source_attach(timer, c->context);
    while (!r.done && !timed_out)
        g_main_context_iteration(c->context, TRUE);
    g_source_destroy(timer);
    g_source_unref(timer);
    if (!r.done) {
        fail(status, ORK_PORTAL_TIMED_OUT, error, size, "the screen-cast portal did not answer %s in time", method);
    } else if (r.code == 1) {
        fail(status, ORK_PORTAL_CANCELLED, error, size, "%s", "the screen sharing was declined in the desktop's dialog");
    } else if (r.code != 0) {
        fail(status, ORK_PORTAL_FAILED, error, size, "the screen-cast portal ended %s with an error", method);
    } else {
        results = r.results;
        r.results = NULL;
    }
out:
    if (r.results)
        g_variant_unref(r.results);
    g_dbus_connection_signal_unsubscribe(c->bus, subscription);
    g_free(path);
    return results;
}

static guint32 screencast_property(struct ork_portal_cast *c, const char *name, int *ok)
{
    GError *e = NULL;
    GVariant *reply = g_dbus_connection_call_sync(c->bus, PORTAL_NAME, PORTAL_PATH, "org.freedesktop.DBus.Properties",
        "Get", g_variant_new("(ss)", SCREENCAST, name), G_VARIANT_TYPE("(v)"), G_DBUS_CALL_FLAGS_NONE, 10000, NULL, &e);
    if (!reply) {
        g_error_free(e);
        *ok = 0;
        return 0;
    }
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    guint32 result = g_variant_is_of_type(value, G_VARIANT_TYPE_UINT32) ? g_variant_get_uint32(value) : 0;
    g_variant_unref(value);
    g_variant_unref(reply);
    *ok = 1;
    return result;
}

GDBusConnection *ork_private_session_bus(const char *bus_address, char *error, size_t error_size)
{
    GError *e = NULL;
    gchar *address = bus_address && *bus_address ? g_strdup(bus_address)
                                                  : g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, NULL, &e);
    if (!address) {
        snprintf(error, error_size, "no D-Bus session bus: %s", e ? e->message : "DBUS_SESSION_BUS_ADDRESS is not set");
        if (e) g_error_free(e);
        return NULL;
    }
    GDBusConnection *bus = g_dbus_connection_new_for_address_sync(address,
        G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL, NULL, &e);
    g_free(address);
    if (!bus) {
        snprintf(error, error_size, "cannot reach the D-Bus session bus: %s", e->message);
        g_error_free(e);
    }
    return bus;
}

ork_portal_cast *ork_portal_cast_open(const char *bus_address, const char *restore_token, int timeout_ms,
                                      int *status, char *error, size_t error_size)
{
    struct ork_portal_cast *c = g_new0(struct ork_portal_cast, 1);
    c->fd = -1;
    c->context = g_main_context_new();
    g_main_context_push_thread_default(c->context);
    *status = ORK_PORTAL_OK;
    GError *e = NULL;
    c->bus = ork_private_session_bus(bus_address, error, error_size);
    if (!c->bus) {
        *status = ORK_PORTAL_UNAVAILABLE;
        goto failed;
    }
    int ok = 0;
    guint32 version = screencast_property(c, "version", &ok);
    if (!ok) {
        fail(status, ORK_PORTAL_UNAVAILABLE, error, error_size, "%s",
             "no screen-cast portal on the session bus (is xdg-desktop-portal installed, with the desktop's own backend?)");
        goto failed;
    }
    guint32 types = screencast_property(c, "AvailableSourceTypes", &ok);
    if (!(types & 1)) {
        fail(status, ORK_PORTAL_UNAVAILABLE, error, error_size, "%s", "the desktop's screen-cast portal offers no monitor to share");
        goto failed;
    }
    guint32 cursors = screencast_property(c, "AvailableCursorModes", &ok);

    static int counter;
    char token[64], session_token[64];
    snprintf(session_token, sizeof session_token, "replayd_%d_%d", (int)getpid(), ++counter);

    GVariantBuilder options;
    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    snprintf(token, sizeof token, "replayd_%d_%d", (int)getpid(), ++counter);
    g_variant_builder_add(&options, "{sv}", "handle_token", g_variant_new_string(token));
    g_variant_builder_add(&options, "{sv}", "session_handle_token", g_variant_new_string(session_token));
    GVariant *results = request(c, "CreateSession", g_variant_new("(a{sv})", &options), token, timeout_ms, status, error, error_size);
    if (!results)
        goto failed;
    const char *session = NULL;
    if (!g_variant_lookup(results, "session_handle", "&s", &session)) {
        g_variant_unref(results);
        fail(status, ORK_PORTAL_FAILED, error, error_size, "%s", "the screen-cast portal gave no session");
        goto failed;
    }
    c->session = g_strdup(session);
    g_variant_unref(results);
    c->closed_subscription = g_dbus_connection_signal_subscribe(c->bus, PORTAL_NAME, "org.freedesktop.portal.Session",
        "Closed", c->session, NULL, G_DBUS_SIGNAL_FLAGS_NONE, on_closed, c, NULL);

    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    snprintf(token, sizeof token, "replayd_%d_%d", (int)getpid(), ++counter);
    g_variant_builder_add(&options, "{sv}", "handle_token", g_variant_new_string(token));
    g_variant_builder_add(&options, "{sv}", "types", g_variant_new_uint32(1));
    g_variant_builder_add(&options, "{sv}", "multiple", g_variant_new_boolean(FALSE));
    // Embedded when offered, else hidden (never metadata: nothing here would draw it).
    g_variant_builder_add(&options, "{sv}", "cursor_mode", g_variant_new_uint32((cursors & 2) ? 2 : 1));
    if (version >= 4) {
        g_variant_builder_add(&options, "{sv}", "persist_mode", g_variant_new_uint32(2));
        if (restore_token && *restore_token)
            g_variant_builder_add(&options, "{sv}", "restore_token", g_variant_new_string(restore_token));
    }
    results = request(c, "SelectSources", g_variant_new("(oa{sv})", c->session, &options), token, timeout_ms, status, error, error_size);
    if (!results)
        goto failed;
    g_variant_unref(results);

    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    snprintf(token, sizeof token, "replayd_%d_%d", (int)getpid(), ++counter);
    g_variant_builder_add(&options, "{sv}", "handle_token", g_variant_new_string(token));
    results = request(c, "Start", g_variant_new("(osa{sv})", c->session, "", &options), token, timeout_ms, status, error, error_size);
    if (!results)
        goto failed;
    GVariant *streams = g_variant_lookup_value(results, "streams", G_VARIANT_TYPE("a(ua{sv})"));
    if (!streams || g_variant_n_children(streams) == 0) {
        if (streams) g_variant_unref(streams);
        g_variant_unref(results);
        fail(status, ORK_PORTAL_FAILED, error, error_size, "%s", "the screen-cast portal started no stream");
        goto failed;
    }
    GVariant *properties = NULL;
    g_variant_get_child(streams, 0, "(u@a{sv})", &c->node, &properties);
    g_variant_lookup(properties, "size", "(ii)", &c->width, &c->height);
    g_variant_unref(properties);
    g_variant_unref(streams);
    const char *next = NULL;
    c->token = g_strdup(g_variant_lookup(results, "restore_token", "&s", &next) && next ? next : "");
    g_variant_unref(results);

    GUnixFDList *fds = NULL;
    GVariant *reply = g_dbus_connection_call_with_unix_fd_list_sync(c->bus, PORTAL_NAME, PORTAL_PATH, SCREENCAST,
        "OpenPipeWireRemote", g_variant_new("(o@a{sv})", c->session, g_variant_new_array(G_VARIANT_TYPE("{sv}"), NULL, 0)), G_VARIANT_TYPE("(h)"),
        G_DBUS_CALL_FLAGS_NONE, 30000, NULL, &fds, NULL, &e);
    if (!reply) {
        fail(status, ORK_PORTAL_FAILED, error, error_size, "the screen-cast portal gave no PipeWire remote: %s", e->message);
        goto failed;
    }
    gint32 index = -1;
    g_variant_get(reply, "(h)", &index);
    g_variant_unref(reply);
    c->fd = fds ? g_unix_fd_list_get(fds, index, &e) : -1;
    if (fds) g_object_unref(fds);
    if (c->fd < 0) {
        fail(status, ORK_PORTAL_FAILED, error, error_size, "the screen-cast portal's PipeWire remote is unusable: %s", e ? e->message : "");
        goto failed;
    }
    g_main_context_pop_thread_default(c->context);
    return c;

failed:
    if (e) g_error_free(e);
    g_main_context_pop_thread_default(c->context);
    ork_portal_cast_close(c);
    return NULL;
}

uint32_t ork_portal_cast_node(const ork_portal_cast *c) { return c->node; }

void ork_portal_cast_size(const ork_portal_cast *c, int32_t *width, int32_t *height)
{
    *width = c->width;
    *height = c->height;
}

int ork_portal_cast_take_fd(ork_portal_cast *c)
{
    int fd = c->fd;
    c->fd = -1;
    return fd;
}

const char *ork_portal_cast_restore_token(const ork_portal_cast *c) { return c->token ? c->token : ""; }

int ork_portal_cast_closed(ork_portal_cast *c)
{
    if (!c->closed && g_main_context_acquire(c->context)) {
        while (g_main_context_iteration(c->context, FALSE)) {}
        g_main_context_release(c->context);
    }
    return c->closed;
}

void ork_portal_cast_close(ork_portal_cast *c)
{
    if (!c)
        return;
    if (c->bus && c->session && !c->closed) {
        GVariant *reply = g_dbus_connection_call_sync(c->bus, PORTAL_NAME, c->session, "org.freedesktop.portal.Session",
            "Close", NULL, NULL, G_DBUS_CALL_FLAGS_NONE, 5000, NULL, NULL);
        if (reply) g_variant_unref(reply);
    }
    if (c->bus && c->closed_subscription)
        g_dbus_connection_signal_unsubscribe(c->bus, c->closed_subscription);
    if (c->bus) {
        g_dbus_connection_close_sync(c->bus, NULL, NULL);
        g_object_unref(c->bus);
    }
    if (c->fd >= 0)
        close(c->fd);
    // Let the unsubscribed callbacks' pending idles run down before the context goes.
    while (g_main_context_iteration(c->context, FALSE)) {}
    g_main_context_unref(c->context);
    g_free(c->session);
    g_free(c->token);
    g_free(c);
}

int ork_portal_probe(const char *bus_address, uint32_t *version, uint32_t *source_types, uint32_t *cursor_modes,
                     char *error, size_t error_size)
{
    struct ork_portal_cast c = { 0 };
    c.bus = ork_private_session_bus(bus_address, error, error_size);
    if (!c.bus)
        return 0;
    int ok = 0;
    *version = screencast_property(&c, "version", &ok);
    if (ok) {
        *source_types = screencast_property(&c, "AvailableSourceTypes", &ok);
        *cursor_modes = screencast_property(&c, "AvailableCursorModes", &ok);
        ok = 1;
    } else {
        snprintf(error, error_size, "no screen-cast portal answers on the session bus");
    }
    g_dbus_connection_close_sync(c.bus, NULL, NULL);
    g_object_unref(c.bus);
    return ok;
}
