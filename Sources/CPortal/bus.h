// Shared between the files of CPortal only.
#pragma once
#include <gio/gio.h>
#include <stddef.h>

/* A private connection to the session bus at `bus_address` (NULL or "": the user's own): the portal
 * and Mutter end our sessions when it closes. NULL with a message in `error` when there is none. */
GDBusConnection *ork_private_session_bus(const char *bus_address, char *error, size_t error_size);
