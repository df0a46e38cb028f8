#define _GNU_SOURCE
#include "CReplayShim.h"

#include <errno.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <xcb/xcbext.h>
#include <xcb/damage.h>
#include <xcb/xfixes.h>
#include <xcb/randr.h>
#include <xcb/shm.h>
#include <xcb/composite.h>
#include <libavutil/error.h>
#include <libavutil/avutil.h>
#include <libavutil/log.h>

int ork_averror(int posix_errno) { return AVERROR(posix_errno); }
int ork_averror_eof(void) { return AVERROR_EOF; }
int64_t ork_av_nopts_value(void) { return AV_NOPTS_VALUE; }

void ork_av_strerror(int err, char *buffer, size_t size) {
    if (size == 0) return;
    if (av_strerror(err, buffer, size) < 0) snprintf(buffer, size, "FFmpeg error %d", err);
    buffer[size - 1] = 0;
}

static ork_av_log_sink g_sink = NULL;
static int g_max_level = AV_LOG_WARNING;

static void ork_av_log_callback(void *avcl, int level, const char *fmt, va_list vl) {
    ork_av_log_sink sink = __atomic_load_n(&g_sink, __ATOMIC_ACQUIRE);
    if (sink == NULL || level > __atomic_load_n(&g_max_level, __ATOMIC_RELAXED)) return;
    char line[1024];
    int print_prefix = 1;
    av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &print_prefix);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    if (n > 0) sink(level, line);
}

void ork_av_log_route(ork_av_log_sink sink, int max_level) {
    __atomic_store_n(&g_max_level, max_level, __ATOMIC_RELAXED);
    __atomic_store_n(&g_sink, sink, __ATOMIC_RELEASE);
    av_log_set_callback(sink ? ork_av_log_callback : av_log_default_callback);
}

static int first_event(xcb_connection_t *c, xcb_extension_t *ext) {
    const xcb_query_extension_reply_t *r = xcb_get_extension_data(c, ext);
    if (r == NULL || !r->present) return -1;
    return r->first_event;
}
int ork_xcb_damage_first_event(xcb_connection_t *c) { return first_event(c, &xcb_damage_id); }
int ork_xcb_xfixes_first_event(xcb_connection_t *c) { return first_event(c, &xcb_xfixes_id); }
int ork_xcb_randr_first_event(xcb_connection_t *c) { return first_event(c, &xcb_randr_id); }
int ork_xcb_has_shm(xcb_connection_t *c) { return first_event(c, &xcb_shm_id) >= 0; }
int ork_xcb_has_composite(xcb_connection_t *c) { return first_event(c, &xcb_composite_id) >= 0; }

int ork_peer_credentials(int fd, uid_t *uid, pid_t *pid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return errno;
    *uid = cred.uid;
    *pid = cred.pid;
    return 0;
}
