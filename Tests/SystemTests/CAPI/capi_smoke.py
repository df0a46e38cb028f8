"""libopenreplaykit.so from Python through ctypes, without a display: ReplayKit's codes and words.

    python3 capi_smoke.py /path/to/libopenreplaykit.so

SystemTests.CAPITests runs it with DISPLAY unset and prints-checks its one JSON line.
"""
import ctypes
import json
import sys
import threading

lib = ctypes.CDLL(sys.argv[1])
lib.ork_error_name.restype = ctypes.c_char_p
lib.ork_error_name.argtypes = [ctypes.c_int]
lib.ork_is_available.restype = ctypes.c_bool
lib.ork_protect_window.restype = ctypes.c_int
lib.ork_protect_window.argtypes = [ctypes.c_uint32, ctypes.c_bool, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32]

COMPLETION = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
lib.ork_start_recording.argtypes = [COMPLETION, ctypes.c_void_p]

outcome = {}
done = threading.Event()


@COMPLETION
def on_start(code, message, user_data):
    outcome["code"] = code
    outcome["message"] = message.decode() if message else None
    outcome["thread"] = threading.current_thread() is not threading.main_thread()
    done.set()


lib.ork_start_recording(on_start, None)
answered = done.wait(10)
message = ctypes.create_string_buffer(256)
protect = lib.ork_protect_window(1, True, None, message, len(message))
print(json.dumps({
    "name": lib.ork_error_name(-5801).decode(),
    "available": lib.ork_is_available(),
    "answered": answered,
    "start": outcome,
    "protect": protect,
    "protectMessage": message.value.decode(),
}))
