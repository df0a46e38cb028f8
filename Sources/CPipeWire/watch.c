// The screen-cast watch behind ork_pw_watch_*: the registry's nodes and links, on a thread loop of its
// own. A node is a compositor's screen-cast stream when it outputs video and its node name is one a
// compositor gives its screen casts; a link from one is a consumer.
#include "ork_pipewire.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pipewire/pipewire.h>

struct entry {
    uint32_t id;
    uint32_t output;   // links: the output node; nodes: 1 when a screen cast
};

struct table {
    struct entry *entries;
    size_t count, capacity;
};

struct ork_pw_watch {
    struct pw_thread_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_registry *registry;
    struct spa_hook registry_listener;
    struct table casts;   // screen-cast nodes
    struct table links;
    int captured;   // what was last reported
    struct spa_source *release;   // reports "no one" a moment after the last consumer went
    ork_pw_watch_changed changed;
    void *user;
};

static void put(struct table *t, uint32_t id, uint32_t output)
{
    if (t->count == t->capacity) {
        size_t capacity = t->capacity ? t->capacity * 2 : 32;
        struct entry *grown = realloc(t->entries, capacity * sizeof *grown);
        if (!grown) return;
        t->entries = grown;
        t->capacity = capacity;
    }
    t->entries[t->count++] = (struct entry){ id, output };
}

static int take(struct table *t, uint32_t id)
{
    for (size_t i = 0; i < t->count; i++) {
        if (t->entries[i].id == id) {
            t->entries[i] = t->entries[--t->count];
            return 1;
        }
    }
    return 0;
}

static int holds(const struct table *t, uint32_t id)
{
    for (size_t i = 0; i < t->count; i++)
        if (t->entries[i].id == id) return 1;
    return 0;
}

static int is_screen_cast(const struct spa_dict *props)
{
    const char *class = spa_dict_lookup(props, PW_KEY_MEDIA_CLASS);
    const char *name = spa_dict_lookup(props, PW_KEY_NODE_NAME);
    if (!class || !name) return 0;
    if (strcmp(class, "Stream/Output/Video") != 0 && strcmp(class, "Video/Source") != 0) return 0;
    static const char *const compositors[] = { "gnome-shell", "mutter", "kwin_wayland", "xdpw_stream", "xdg-desktop-portal-wlr", NULL };
    for (int i = 0; compositors[i]; i++)
        if (strcmp(name, compositors[i]) == 0) return 1;
    return strstr(name, "screen-cast") != NULL || strstr(name, "screencast") != NULL;
}

static int consumed(const struct ork_pw_watch *w)
{
    for (size_t i = 0; i < w->links.count; i++)
        if (holds(&w->casts, w->links.entries[i].output)) return 1;
    return 0;
}

/* A consumer that relinks (a recorder renegotiating its format) leaves the graph for a moment:
 * "no one" is said only once no one has read for half a second, so isCaptured does not flicker. */
static void update(struct ork_pw_watch *w)
{
    int now = consumed(w);
    if (now && !w->captured) {
        w->captured = 1;
        w->changed(w->user, 1);
    }
    struct timespec release = { 0, now || !w->captured ? 0 : 500000000 };
    pw_loop_update_timer(pw_thread_loop_get_loop(w->loop), w->release, &release, NULL, false);
}

static void on_release(void *data, uint64_t expirations)
{
    struct ork_pw_watch *w = data;
    (void)expirations;
    if (w->captured && !consumed(w)) {
        w->captured = 0;
        w->changed(w->user, 0);
    }
}

static void on_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                      const struct spa_dict *props)
{
    struct ork_pw_watch *w = data;
    (void)permissions; (void)version;
    if (!props) return;
    if (strcmp(type, PW_TYPE_INTERFACE_Node) == 0 && is_screen_cast(props)) {
        put(&w->casts, id, 1);
        update(w);
    } else if (strcmp(type, PW_TYPE_INTERFACE_Link) == 0) {
        const char *output = spa_dict_lookup(props, PW_KEY_LINK_OUTPUT_NODE);
        if (output) {
            put(&w->links, id, (uint32_t)strtoul(output, NULL, 10));
            update(w);
        }
    }
}

static void on_global_remove(void *data, uint32_t id)
{
    struct ork_pw_watch *w = data;
    if (take(&w->links, id) || take(&w->casts, id))
        update(w);
}

static const struct pw_registry_events registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = on_global,
    .global_remove = on_global_remove,
};

ork_pw_watch *ork_pw_watch_open(ork_pw_watch_changed changed, void *context, char *error, size_t error_size)
{
    ork_pw_init_once();
    struct ork_pw_watch *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    w->changed = changed;
    w->user = context;
    w->loop = pw_thread_loop_new("replayd-pw-watch", NULL);
    w->context = w->loop ? pw_context_new(pw_thread_loop_get_loop(w->loop), NULL, 0) : NULL;
    if (!w->context || pw_thread_loop_start(w->loop) < 0) {
        snprintf(error, error_size, "cannot start PipeWire's thread loop");
        ork_pw_watch_close(w);
        return NULL;
    }
    pw_thread_loop_lock(w->loop);
    w->core = pw_context_connect(w->context, NULL, 0);
    if (!w->core) {
        snprintf(error, error_size, "cannot connect to PipeWire: %s", strerror(errno));
        pw_thread_loop_unlock(w->loop);
        ork_pw_watch_close(w);
        return NULL;
    }
    w->release = pw_loop_add_timer(pw_thread_loop_get_loop(w->loop), on_release, w);
    w->registry = pw_core_get_registry(w->core, PW_VERSION_REGISTRY, 0);
    pw_registry_add_listener(w->registry, &w->registry_listener, &registry_events, w);
    w->changed(w->user, 0);
    pw_thread_loop_unlock(w->loop);
    return w;
}

void ork_pw_watch_close(ork_pw_watch *w)
{
    if (!w) return;
    if (w->loop) pw_thread_loop_stop(w->loop);
    if (w->registry) {
        spa_hook_remove(&w->registry_listener);
        pw_proxy_destroy((struct pw_proxy *)w->registry);
    }
    if (w->release) pw_loop_destroy_source(pw_thread_loop_get_loop(w->loop), w->release);
    if (w->core) pw_core_disconnect(w->core);
    if (w->context) pw_context_destroy(w->context);
    if (w->loop) pw_thread_loop_destroy(w->loop);
    free(w->casts.entries);
    free(w->links.entries);
    free(w);
}
