#ifndef CFFMPEGSHIM_H
#define CFFMPEGSHIM_H
// FFmpeg glue Swift cannot express: function-like macros (AVERROR) and the variadic log callback.
// Every name is `ork_`.
#include <stddef.h>

int ork_averror(int posix_errno);          // AVERROR(e)
int ork_averror_eof(void);                  // AVERROR_EOF
/// Writes FFmpeg's text for `err` into `buffer` (always NUL-terminated).
void ork_av_strerror(int err, char *buffer, size_t size);

/// The receiver of FFmpeg's log lines: level (AV_LOG_*) and one formatted, NUL-terminated line.
typedef void (*ork_av_log_sink)(int level, const char *line);
/// Routes every FFmpeg log line at or above `max_level` importance into `sink` (NULL restores the default).
/// FFmpeg has one log callback per process: this is its only setter.
void ork_av_log_route(ork_av_log_sink sink, int max_level);

#endif
