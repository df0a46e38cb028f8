#ifndef ORK_PIPEWIRE_H
#define ORK_PIPEWIRE_H
/* One PipeWire video stream consumed on PipeWire's own thread: the latest picture is held (not copied)
 * until the next one arrives, and read under a lock. Plain C types only: Swift never sees libpipewire. */
#include <stddef.h>
#include <stdint.h>

typedef struct ork_pw_video ork_pw_video;

typedef struct {
    int32_t x, y, width, height;
} ork_pw_rect;

enum { ORK_PW_MAX_DAMAGE = 16 };

/* Pixel order of a picture's 32-bit pixels in memory. */
enum { ORK_PW_BGRX = 0, ORK_PW_RGBX = 1 };

typedef struct {
    const uint8_t *pixels;   /* the picture's top-left pixel (crop applied) */
    int32_t width, height;   /* after the crop */
    int32_t stride;          /* bytes from one row to the next */
    int32_t order;           /* ORK_PW_BGRX or ORK_PW_RGBX */
    uint64_t sequence;       /* counts pictures received; 0 before the first */
    int32_t all_changed;     /* 1: treat the whole picture as changed (first, resized, or too many pieces) */
    int32_t damage_count;    /* else: what changed since the last lock, picture coordinates */
    ork_pw_rect damage[ORK_PW_MAX_DAMAGE];
} ork_pw_picture;

/* Connects to the PipeWire remote `fd` (taken: closed with the stream; -1: the user's own daemon)
 * and consumes the video node `node` as shared-memory buffers, at most `max_fps` pictures a second
 * (the compositor renders no more into the stream). NULL with a message on failure. */
ork_pw_video *ork_pw_video_open(int fd, uint32_t node, int max_fps, const char *name, char *error, size_t error_size);

/* Blocks until a picture newer than `seen` has arrived or the stream ended, or until `deadline_ns`
 * (CLOCK_MONOTONIC). 1: a newer picture; 0: the deadline passed; -1: the stream ended (see ork_pw_video_error). */
int ork_pw_video_wait(ork_pw_video *video, uint64_t seen, int64_t deadline_ns);

/* Takes the lock. When the latest picture is newer than `seen`, fills `picture` (its changes since the
 * last call) and returns 1, keeping the lock until ork_pw_video_unlock; else releases it and returns
 * 0, or -1 when the stream has ended. */
int ork_pw_video_lock_latest(ork_pw_video *video, uint64_t seen, ork_pw_picture *picture);
void ork_pw_video_unlock(ork_pw_video *video);

/* Why the stream ended; "" while it runs. Valid until ork_pw_video_close. */
const char *ork_pw_video_error(ork_pw_video *video);

/* Stops the thread, disconnects, frees. */
void ork_pw_video_close(ork_pw_video *video);

/* Watches the user's PipeWire graph for the compositor's screen-cast streams (GNOME Shell's, KWin's,
 * xdg-desktop-portal-wlr's) being read by anyone: replayd, a browser sharing the screen, OBS.
 * `changed` is called on PipeWire's thread with 1 when the first such consumer appears and 0 when
 * the last one goes (and once at the start). NULL with a message when PipeWire cannot be reached. */
typedef struct ork_pw_watch ork_pw_watch;
typedef void (*ork_pw_watch_changed)(void *context, int captured);
ork_pw_watch *ork_pw_watch_open(ork_pw_watch_changed changed, void *context, char *error, size_t error_size);
void ork_pw_watch_close(ork_pw_watch *watch);

#endif
