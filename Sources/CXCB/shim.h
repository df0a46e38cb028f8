#ifndef CXCB_SHIM_H
#define CXCB_SHIM_H
#include <xcb/xcb.h>
#include <xcb/xproto.h>
#include <xcb/shm.h>
#include <xcb/xfixes.h>
#include <xcb/damage.h>
#include <xcb/randr.h>
#include <xcb/composite.h>
#include <xcb/shape.h>
#include <xcb/res.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#endif
