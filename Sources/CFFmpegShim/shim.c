#include "CFFmpegShim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/avutil.h>
#include <libavutil/log.h>

// The Swift code is written against FFmpeg 5.1 (Debian 12): the AVChannelLayout API (59) and
// AVFrame/AVPacket fields as they are there. A build against another major version fails here,
// with this line, rather than somewhere in Swift.
_Static_assert(LIBAVCODEC_VERSION_MAJOR == 59, "OpenReplayKit is written against libavcodec 59 (FFmpeg 5.1)");
_Static_assert(LIBAVFORMAT_VERSION_MAJOR == 59, "OpenReplayKit is written against libavformat 59 (FFmpeg 5.1)");
_Static_assert(LIBAVUTIL_VERSION_MAJOR == 57, "OpenReplayKit is written against libavutil 57 (FFmpeg 5.1)");
// The Swift side writes AV_NOPTS_VALUE (a macro of a cast) as Int64.min (ReplayFFmpeg.noTimestamp).
_Static_assert(AV_NOPTS_VALUE == INT64_MIN, "AV_NOPTS_VALUE is INT64_MIN");
// AVERROR(e) is -e on every platform FFmpeg supports with EDOM > 0; the Swift side compares codes.
_Static_assert(AVERROR(EAGAIN) == -EAGAIN, "AVERROR is the negated errno");

int ork_averror(int posix_errno) { return AVERROR(posix_errno); }
int ork_averror_eof(void) { return AVERROR_EOF; }

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
