#ifndef CCAIRO_SHIM_H
#define CCAIRO_SHIM_H
#include <cairo/cairo.h>
#include <cairo/cairo-xcb.h>
#endif
