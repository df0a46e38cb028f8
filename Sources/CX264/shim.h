#ifndef ORK_CX264_SHIM_H
#define ORK_CX264_SHIM_H
#include <stdint.h>
#include <x264.h>

/* x264_encoder_open is a macro naming the build-specific symbol (x264_encoder_open_164), which
   Swift does not import: this inline function calls it by its macro name. */
static inline x264_t *ork_x264_encoder_open(x264_param_t *param) {
    return x264_encoder_open(param);
}

#endif
