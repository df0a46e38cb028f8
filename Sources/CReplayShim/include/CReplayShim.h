#ifndef CREPLAYSHIM_H
#define CREPLAYSHIM_H
// The one C target of OpenReplayKit: what Swift cannot call directly (function-like macros,
// variadic callbacks, externs of incomplete type, socket ancillary data). Every name is `ork_`.
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <xcb/xcb.h>

// MARK: FFmpeg
int ork_averror(int posix_errno);          // AVERROR(e)
int ork_averror_eof(void);                  // AVERROR_EOF
int64_t ork_av_nopts_value(void);           // AV_NOPTS_VALUE
/// Writes FFmpeg's text for `err` into `buffer` (always NUL-terminated).
void ork_av_strerror(int err, char *buffer, size_t size);

/// The receiver of FFmpeg's log lines: level (AV_LOG_*) and one formatted, NUL-terminated line.
typedef void (*ork_av_log_sink)(int level, const char *line);
/// Routes every FFmpeg log line at or above `max_level` importance into `sink` (NULL restores the default).
void ork_av_log_route(ork_av_log_sink sink, int max_level);

// MARK: XCB extensions (their xcb_extension_t ids are externs of incomplete type in Swift)
/// The first event code of an extension, or -1 when the server lacks it.
int ork_xcb_damage_first_event(xcb_connection_t *c);
int ork_xcb_xfixes_first_event(xcb_connection_t *c);
int ork_xcb_randr_first_event(xcb_connection_t *c);
/// 1 when the server has MIT-SHM.
int ork_xcb_has_shm(xcb_connection_t *c);
/// 1 when the server has Composite.
int ork_xcb_has_composite(xcb_connection_t *c);

// MARK: Sockets
/// The uid and pid of the peer of a connected Unix socket (SO_PEERCRED). 0 on success, else errno.
int ork_peer_credentials(int fd, uid_t *uid, pid_t *pid);

#endif
