#include "CXCBShim.h"

#include <xcb/xcbext.h>
#include <xcb/damage.h>
#include <xcb/xfixes.h>
#include <xcb/randr.h>
#include <xcb/shm.h>

static int first_event(xcb_connection_t *c, xcb_extension_t *ext) {
    const xcb_query_extension_reply_t *r = xcb_get_extension_data(c, ext);
    if (r == NULL || !r->present) return -1;
    return r->first_event;
}
int ork_xcb_damage_first_event(xcb_connection_t *c) { return first_event(c, &xcb_damage_id); }
int ork_xcb_xfixes_first_event(xcb_connection_t *c) { return first_event(c, &xcb_xfixes_id); }
int ork_xcb_randr_first_event(xcb_connection_t *c) { return first_event(c, &xcb_randr_id); }
int ork_xcb_has_shm(xcb_connection_t *c) { return first_event(c, &xcb_shm_id) >= 0; }
