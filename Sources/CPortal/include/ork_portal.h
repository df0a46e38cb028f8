#ifndef ORK_PORTAL_H
#define ORK_PORTAL_H
/* The xdg-desktop-portal ScreenCast calls replayd makes for the person's recordings, through GIO's
 * D-Bus on a private connection and a private main context (blocking: call it from a thread of its own). */
#include <stddef.h>
#include <stdint.h>

typedef struct ork_portal_cast ork_portal_cast;

/* How the portal answered. */
enum {
    ORK_PORTAL_OK = 0,
    ORK_PORTAL_CANCELLED = 1,    /* the person declined in the desktop's dialog */
    ORK_PORTAL_FAILED = 2,       /* the portal said no, or another error (see the message) */
    ORK_PORTAL_UNAVAILABLE = 3,  /* no session bus, no portal, or no ScreenCast interface */
    ORK_PORTAL_TIMED_OUT = 4,
};

/* CreateSession, SelectSources (monitors, the cursor embedded when offered, persist_mode 2 and
 * `restore_token` when not NULL), Start, OpenPipeWireRemote. Waits at most `timeout_ms` for each
 * answer (the dialog included). NULL with `*status` and a message on failure. */
ork_portal_cast *ork_portal_cast_open(const char *bus_address, const char *restore_token, int timeout_ms,
                                      int *status, char *error, size_t error_size);

/* The stream's PipeWire node id, its size as the portal gave it (0 when unknown). */
uint32_t ork_portal_cast_node(const ork_portal_cast *cast);
void ork_portal_cast_size(const ork_portal_cast *cast, int32_t *width, int32_t *height);
/* The PipeWire remote's descriptor; the caller owns it after this (-1 the second time). */
int ork_portal_cast_take_fd(ork_portal_cast *cast);
/* The token for the next session without a dialog ("" when the portal gave none). */
const char *ork_portal_cast_restore_token(const ork_portal_cast *cast);
/* Whether the desktop closed the session (its own stop button): 1 once the Closed signal came. */
int ork_portal_cast_closed(ork_portal_cast *cast);
/* Closes the session (if still open) and frees everything. */
void ork_portal_cast_close(ork_portal_cast *cast);

/* What the screen-cast portal offers, without starting anything (`replay doctor`): 1 with its version,
 * source types and cursor modes; 0 with a message when there is no bus or no portal. */
int ork_portal_probe(const char *bus_address, uint32_t *version, uint32_t *source_types, uint32_t *cursor_modes,
                     char *error, size_t error_size);

#endif
