#ifndef CGTK_SHIM_H
#define CGTK_SHIM_H
#include <gtk/gtk.h>
#endif
