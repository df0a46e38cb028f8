#ifndef ORK_MUTTER_H
#define ORK_MUTTER_H
/* An app's own windows on GNOME: OpenReplayKit's GNOME Shell extension (org.openreplaykit.Shell1,
 * dist/gnome-shell/) says which windows belong to a set of processes, and Mutter's own
 * org.gnome.Mutter.ScreenCast records each window alone (RecordWindow). GIO D-Bus on a private
 * connection and a private main context; blocking: call it from a thread of its own, one thread at a
 * time per ork_gnome_shell (and the casts opened through it). */
#include <stddef.h>
#include <stdint.h>

typedef struct ork_gnome_shell ork_gnome_shell;
typedef struct ork_mutter_window_cast ork_mutter_window_cast;

enum {
    ORK_GNOME_OK = 0,
    ORK_GNOME_FAILED = 2,        /* another error (see the message) */
    ORK_GNOME_UNAVAILABLE = 3,   /* no session bus, or nobody owns the name (the extension is not enabled) */
    ORK_GNOME_DENIED = 5,        /* the extension refused us (we are not replayd) */
};

/* One window of the app, as the extension reports it. */
typedef struct {
    uint64_t id;                 /* Mutter's window id (RecordWindow's "window-id") */
    uint32_t pid;
    int32_t x, y, width, height; /* the frame's rectangle, stage pixels */
    uint32_t stacking;           /* position among all windows, 0 = the lowest */
    int32_t shown;               /* mapped, not minimized, on the active workspace */
} ork_gnome_window;

/* Connects to the session bus (`bus_address`, or the session's own when NULL) and listens for the
 * extension's WindowsChanged. NULL with a message when there is no bus. */
ork_gnome_shell *ork_gnome_shell_open(const char *bus_address, char *error, size_t error_size);

/* The windows of `pids` (bottom to top), at most `capacity` in `windows`. Returns how many the
 * extension reported (may exceed `capacity`), or -1 with `*status` and a message. */
int ork_gnome_shell_windows(ork_gnome_shell *shell, const uint32_t *pids, size_t pid_count, ork_gnome_window *windows,
                            size_t capacity, int timeout_ms, int *status, char *error, size_t error_size);

/* The stage's size (the monitor's, with one), the canvas the frame rectangles are on. 1, or 0 with
 * `*status` and a message. */
int ork_gnome_shell_screen_size(ork_gnome_shell *shell, int32_t *width, int32_t *height, int timeout_ms, int *status,
                                char *error, size_t error_size);

/* Dispatches what has come (without waiting): 1 when the extension said WindowsChanged since the
 * last call, or a window cast's session was closed; else 0. */
int ork_gnome_shell_changed(ork_gnome_shell *shell);

/* Whether the extension runs (its name has an owner on the bus): anyone may ask this, only replayd
 * gets answers from it (`replay doctor`). */
int ork_gnome_shell_running(ork_gnome_shell *shell);

/* Mutter's ScreenCast interface version, 0 when Mutter does not answer (`replay doctor`). */
uint32_t ork_mutter_screencast_version(ork_gnome_shell *shell);

void ork_gnome_shell_close(ork_gnome_shell *shell);

/* CreateSession, RecordWindow {'window-id': window, 'cursor-mode': hidden}, Start, then waits at most
 * `timeout_ms` for the stream's PipeWireStreamAdded. The cast keeps its own reference to the shell's
 * connection: it may outlive `shell`. NULL with a message on failure. */
ork_mutter_window_cast *ork_mutter_window_cast_open(ork_gnome_shell *shell, uint64_t window, int timeout_ms,
                                                    char *error, size_t error_size);
/* The stream's PipeWire node id (on the user's own PipeWire daemon). */
uint32_t ork_mutter_window_cast_node(const ork_mutter_window_cast *cast);
/* 1 once Mutter closed the session (the window went away); seen through ork_gnome_shell_changed. */
int ork_mutter_window_cast_closed(const ork_mutter_window_cast *cast);
/* Stops the session (if still open) and frees everything. */
void ork_mutter_window_cast_close(ork_mutter_window_cast *cast);

#endif
