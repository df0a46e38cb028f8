// libsecret: the Secret Service (GNOME Keyring, KWallet) over D-Bus, for the app groups' secrets
// (OpenReplayKit's RPAppGroup). Only its non-variadic calls (the `…v_sync` ones) are used from Swift.
#include <libsecret/secret.h>
