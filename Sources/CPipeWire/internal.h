// Shared between the files of CPipeWire only.
#pragma once
// pw_init, once for the process.
void ork_pw_init_once(void);
