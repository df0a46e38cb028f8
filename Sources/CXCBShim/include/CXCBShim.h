#ifndef CXCBSHIM_H
#define CXCBSHIM_H
// XCB glue: the extensions' xcb_extension_t ids are externs of incomplete type, which Swift cannot
// take the address of. Every name is `ork_`.
#include <xcb/xcb.h>

/// The first event code of an extension, or -1 when the server lacks it.
int ork_xcb_damage_first_event(xcb_connection_t *c);
int ork_xcb_xfixes_first_event(xcb_connection_t *c);
int ork_xcb_randr_first_event(xcb_connection_t *c);
/// 1 when the server has MIT-SHM.
int ork_xcb_has_shm(xcb_connection_t *c);

#endif
