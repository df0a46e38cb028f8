// The PipeWire video consumer behind ork_pipewire.h. SPA pods are macros and variadics, so the stream's
// formats and buffer parameters are built here, in C. PipeWire's thread loop runs the stream; the
// latest buffer is held (not requeued) until a newer one arrives, and the reader maps it under `lock`.
#include "ork_pipewire.h"
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/utils/result.h>

struct ork_pw_video {
    struct pw_thread_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_stream *stream;
    struct spa_hook stream_listener;
    struct spa_hook core_listener;

    // Everything below is guarded by `lock`; `changed` is signalled on a new picture and on the end.
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct spa_video_info_raw format;
    int has_format;
    struct pw_buffer *held;          // the latest picture's buffer, not yet given back
    const uint8_t *pixels;           // its first pixel, crop applied
    int32_t width, height, stride, order;
    uint64_t sequence;
    int all_changed;
    int damage_count;
    ork_pw_rect damage[ORK_PW_MAX_DAMAGE];
    int ended;
    char error[256];
};

static int64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static void end_locked(struct ork_pw_video *v, const char *why)
{
    if (!v->ended) {
        v->ended = 1;
        snprintf(v->error, sizeof v->error, "%s", why);
    }
    pthread_cond_broadcast(&v->changed);
}

static void add_damage_locked(struct ork_pw_video *v, ork_pw_rect r)
{
    if (v->all_changed || r.width <= 0 || r.height <= 0)
        return;
    if (v->damage_count == ORK_PW_MAX_DAMAGE) {
        v->all_changed = 1;
        return;
    }
    v->damage[v->damage_count++] = r;
}

static void on_process(void *data)
{
    struct ork_pw_video *v = data;
    // Only the newest picture matters: older ones still queued go straight back.
    struct pw_buffer *newest = NULL, *b;
    while ((b = pw_stream_dequeue_buffer(v->stream)) != NULL) {
        if (newest)
            pw_stream_queue_buffer(v->stream, newest);
        newest = b;
    }
    if (!newest)
        return;
    struct spa_buffer *buf = newest->buffer;
    struct spa_data *d = &buf->datas[0];
    struct spa_meta_header *header = spa_buffer_find_meta_data(buf, SPA_META_Header, sizeof *header);
    int usable = d->data != NULL && d->chunk != NULL && d->chunk->size > 0
        && !(d->chunk->flags & SPA_CHUNK_FLAG_CORRUPTED)
        && !(header && (header->flags & SPA_META_HEADER_FLAG_CORRUPTED));
    pthread_mutex_lock(&v->lock);
    if (!usable || !v->has_format) {
        pthread_mutex_unlock(&v->lock);
        pw_stream_queue_buffer(v->stream, newest);
        return;
    }
    int32_t width = (int32_t)v->format.size.width, height = (int32_t)v->format.size.height;
    int32_t stride = d->chunk->stride > 0 ? d->chunk->stride : width * 4;
    const uint8_t *base = SPA_PTROFF(d->data, d->chunk->offset, const uint8_t);
    int32_t cx = 0, cy = 0, cw = width, ch = height;
    struct spa_meta_region *crop = spa_buffer_find_meta_data(buf, SPA_META_VideoCrop, sizeof *crop);
    if (crop && spa_meta_region_is_valid(crop)) {
        int32_t x = crop->region.position.x, y = crop->region.position.y;
        int32_t w = (int32_t)crop->region.size.width, h = (int32_t)crop->region.size.height;
        if (x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= width && y + h <= height) {
            cx = x; cy = y; cw = w; ch = h;
        }
    }
    // A picture too small for what its rows claim is not read.
    if ((size_t)stride * (size_t)(height - 1) + (size_t)width * 4 > (size_t)d->chunk->size) {
        pthread_mutex_unlock(&v->lock);
        pw_stream_queue_buffer(v->stream, newest);
        return;
    }
    if (cw != v->width || ch != v->height || v->sequence == 0)
        v->all_changed = 1;
    struct spa_meta *damage = spa_buffer_find_meta(buf, SPA_META_VideoDamage);
    int regions = 0;
    if (damage) {
        struct spa_meta_region *r;
        spa_meta_for_each(r, damage) {
            if (!spa_meta_region_is_valid(r))
                continue;
            regions++;
            ork_pw_rect rect = { r->region.position.x - cx, r->region.position.y - cy,
                                 (int32_t)r->region.size.width, (int32_t)r->region.size.height };
            add_damage_locked(v, rect);
        }
    }
    // No damage said: all of it may have changed.
    if (regions == 0)
        v->all_changed = 1;
    struct pw_buffer *previous = v->held;
    v->held = newest;
    v->pixels = base + (size_t)cy * stride + (size_t)cx * 4;
    v->width = cw;
    v->height = ch;
    v->stride = stride;
    v->order = (v->format.format == SPA_VIDEO_FORMAT_RGBx || v->format.format == SPA_VIDEO_FORMAT_RGBA) ? ORK_PW_RGBX : ORK_PW_BGRX;
    v->sequence++;
    pthread_cond_broadcast(&v->changed);
    pthread_mutex_unlock(&v->lock);
    if (previous)
        pw_stream_queue_buffer(v->stream, previous);
}

static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param)
{
    struct ork_pw_video *v = data;
    if (!param || id != SPA_PARAM_Format)
        return;
    struct spa_video_info_raw info;
    if (spa_format_video_raw_parse(param, &info) < 0)
        return;
    pthread_mutex_lock(&v->lock);
    v->format = info;
    v->has_format = 1;
    v->all_changed = 1;
    pthread_mutex_unlock(&v->lock);

    // Shared memory only (memfd or plain): the pictures are converted on the CPU.
    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[4];
    int n = 0;
    params[n++] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(4, 3, 16),
        SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
        SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr)));
    params[n++] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
    params[n++] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoDamage),
        SPA_PARAM_META_size, SPA_POD_CHOICE_RANGE_Int(sizeof(struct spa_meta_region) * ORK_PW_MAX_DAMAGE,
            sizeof(struct spa_meta_region), sizeof(struct spa_meta_region) * ORK_PW_MAX_DAMAGE));
    params[n++] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoCrop),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_region)));
    pw_stream_update_params(v->stream, params, n);
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error)
{
    struct ork_pw_video *v = data;
    (void)old;
    if (state != PW_STREAM_STATE_ERROR && state != PW_STREAM_STATE_UNCONNECTED)
        return;
    pthread_mutex_lock(&v->lock);
    end_locked(v, error && *error ? error : "the screen-cast stream was disconnected");
    pthread_mutex_unlock(&v->lock);
}

/* The stream takes its buffers back (a new format, or the stream ending: the window or the
 * screen cast went away): the held one is no longer ours to map or to queue. */
static void on_remove_buffer(void *data, struct pw_buffer *buffer)
{
    struct ork_pw_video *v = data;
    pthread_mutex_lock(&v->lock);
    if (v->held == buffer) {
        v->held = NULL;
        v->pixels = NULL;
    }
    pthread_mutex_unlock(&v->lock);
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .remove_buffer = on_remove_buffer,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .process = on_process,
};

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message)
{
    struct ork_pw_video *v = data;
    (void)seq;
    if (id != PW_ID_CORE)
        return;
    char why[200];
    snprintf(why, sizeof why, "PipeWire: %s (%s)", message ? message : "error", spa_strerror(res));
    pthread_mutex_lock(&v->lock);
    end_locked(v, why);
    pthread_mutex_unlock(&v->lock);
}

static const struct pw_core_events core_events = { PW_VERSION_CORE_EVENTS, .error = on_core_error };

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_pipewire(void) { pw_init(NULL, NULL); }
void ork_pw_init_once(void) { pthread_once(&init_once, init_pipewire); }

ork_pw_video *ork_pw_video_open(int fd, uint32_t node, int max_fps, const char *name, char *error, size_t error_size)
{
    ork_pw_init_once();
    struct ork_pw_video *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(error, error_size, "out of memory");
        if (fd >= 0) close(fd);
        return NULL;
    }
    pthread_mutex_init(&v->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&v->changed, &attr);
    pthread_condattr_destroy(&attr);
    v->loop = pw_thread_loop_new("replayd-pipewire", NULL);
    if (!v->loop) {
        snprintf(error, error_size, "cannot make PipeWire's thread loop");
        if (fd >= 0) close(fd);
        ork_pw_video_close(v);
        return NULL;
    }
    v->context = pw_context_new(pw_thread_loop_get_loop(v->loop), NULL, 0);
    if (!v->context) {
        snprintf(error, error_size, "cannot make a PipeWire context: %s", strerror(errno));
        if (fd >= 0) close(fd);
        ork_pw_video_close(v);
        return NULL;
    }
    if (pw_thread_loop_start(v->loop) < 0) {
        snprintf(error, error_size, "cannot start PipeWire's thread");
        if (fd >= 0) close(fd);
        ork_pw_video_close(v);
        return NULL;
    }
    pw_thread_loop_lock(v->loop);
    v->core = fd >= 0 ? pw_context_connect_fd(v->context, fd, NULL, 0) : pw_context_connect(v->context, NULL, 0);
    if (!v->core) {
        snprintf(error, error_size, "cannot connect to PipeWire: %s", strerror(errno));
        pw_thread_loop_unlock(v->loop);
        ork_pw_video_close(v);
        return NULL;
    }
    pw_core_add_listener(v->core, &v->core_listener, &core_events, v);
    v->stream = pw_stream_new(v->core, name,
        pw_properties_new(PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture", PW_KEY_MEDIA_ROLE, "Screen", NULL));
    if (!v->stream) {
        snprintf(error, error_size, "cannot make a PipeWire stream: %s", strerror(errno));
        pw_thread_loop_unlock(v->loop);
        ork_pw_video_close(v);
        return NULL;
    }
    pw_stream_add_listener(v->stream, &v->stream_listener, &stream_events, v);

    uint32_t rate = max_fps > 0 ? (uint32_t)max_fps : 60;
    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[1];
    params[0] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat,
        SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
        SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
        SPA_FORMAT_VIDEO_format, SPA_POD_CHOICE_ENUM_Id(5, SPA_VIDEO_FORMAT_BGRx, SPA_VIDEO_FORMAT_BGRx,
            SPA_VIDEO_FORMAT_BGRA, SPA_VIDEO_FORMAT_RGBx, SPA_VIDEO_FORMAT_RGBA),
        SPA_FORMAT_VIDEO_size, SPA_POD_CHOICE_RANGE_Rectangle(&SPA_RECTANGLE(1920, 1080),
            &SPA_RECTANGLE(1, 1), &SPA_RECTANGLE(16384, 16384)),
        SPA_FORMAT_VIDEO_framerate, SPA_POD_CHOICE_RANGE_Fraction(&SPA_FRACTION(0, 1),
            &SPA_FRACTION(0, 1), &SPA_FRACTION(rate, 1)),
        // Compositors send pictures on change, as fast as they draw unless told: no faster than the
        // recording takes them (each is a copy of the screen in the compositor).
        SPA_FORMAT_VIDEO_maxFramerate, SPA_POD_CHOICE_RANGE_Fraction(&SPA_FRACTION(rate, 1),
            &SPA_FRACTION(1, 1), &SPA_FRACTION(rate, 1)));
    // The portal and Mutter name a node by id: it goes as the target id (target.object wants a serial).
    int res = pw_stream_connect(v->stream, PW_DIRECTION_INPUT, node,
        PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS, params, 1);
    pw_thread_loop_unlock(v->loop);
    if (res < 0) {
        snprintf(error, error_size, "cannot connect to the screen-cast node %u: %s", node, spa_strerror(res));
        ork_pw_video_close(v);
        return NULL;
    }
    return v;
}

int ork_pw_video_wait(ork_pw_video *v, uint64_t seen, int64_t deadline_ns)
{
    struct timespec until = { .tv_sec = deadline_ns / 1000000000, .tv_nsec = deadline_ns % 1000000000 };
    pthread_mutex_lock(&v->lock);
    int result = 0;
    for (;;) {
        if (v->sequence > seen) { result = 1; break; }
        if (v->ended) { result = -1; break; }
        if (monotonic_ns() >= deadline_ns) break;
        if (pthread_cond_timedwait(&v->changed, &v->lock, &until) == ETIMEDOUT) {
            result = v->sequence > seen ? 1 : v->ended ? -1 : 0;
            break;
        }
    }
    pthread_mutex_unlock(&v->lock);
    return result;
}

int ork_pw_video_lock_latest(ork_pw_video *v, uint64_t seen, ork_pw_picture *picture)
{
    pthread_mutex_lock(&v->lock);
    if (v->sequence <= seen || !v->held) {
        int ended = v->ended;
        pthread_mutex_unlock(&v->lock);
        return ended ? -1 : 0;
    }
    picture->pixels = v->pixels;
    picture->width = v->width;
    picture->height = v->height;
    picture->stride = v->stride;
    picture->order = v->order;
    picture->sequence = v->sequence;
    picture->all_changed = v->all_changed;
    picture->damage_count = v->damage_count;
    memcpy(picture->damage, v->damage, sizeof v->damage);
    v->all_changed = 0;
    v->damage_count = 0;
    return 1;
}

void ork_pw_video_unlock(ork_pw_video *v)
{
    pthread_mutex_unlock(&v->lock);
}

const char *ork_pw_video_error(ork_pw_video *v)
{
    return v->error;
}

void ork_pw_video_close(ork_pw_video *v)
{
    if (!v)
        return;
    if (v->loop)
        pw_thread_loop_stop(v->loop);
    if (v->stream) {
        if (v->held)
            pw_stream_queue_buffer(v->stream, v->held);
        v->held = NULL;
        pw_stream_destroy(v->stream);
    }
    if (v->core)
        pw_core_disconnect(v->core);
    if (v->context)
        pw_context_destroy(v->context);
    if (v->loop)
        pw_thread_loop_destroy(v->loop);
    pthread_cond_destroy(&v->changed);
    pthread_mutex_destroy(&v->lock);
    free(v);
}
