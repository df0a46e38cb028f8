// The C API's header is the contract: Swift (OpenReplayKitC) imports these types, so the exported
// functions and the header cannot drift apart. This file only pins what C callers rely on.
#include "openreplaykit.h"
#include <stddef.h>

_Static_assert(ORK_ERROR_USER_DECLINED == -5801, "RPRecordingErrorCode.userDeclined");
_Static_assert(ORK_ERROR_INTERRUPTED == -5806, "RPRecordingErrorCode.interrupted");
_Static_assert(ORK_ERROR_ATTEMPT_TO_STOP_NON_RECORDING == -5829, "RPRecordingErrorCode.attemptToStopNonRecording");
_Static_assert(ORK_ERROR_CODEC_NOT_SUPPORTED == -5837, "RPRecordingErrorCode.codecNotSupported");
_Static_assert(ORK_SAMPLE_VIDEO == 1 && ORK_SAMPLE_AUDIO_APP == 2 && ORK_SAMPLE_AUDIO_MIC == 3, "RPSampleBufferType");
_Static_assert(sizeof(ork_sample_type) == 4, "an int-sized enum (Rust and ctypes mirror it as int32)");
_Static_assert(offsetof(ork_sample, pts_ns) == 8, "ork_sample's layout is part of the ABI");
_Static_assert(sizeof(ork_sample) == 80, "ork_sample's layout is part of the ABI");
