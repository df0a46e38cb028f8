"""The app's own broadcast from Python through ctypes (libopenreplaykit.so's broadcasting calls).

    python3 capi_broadcast.py /path/to/libopenreplaykit.so EXTENSION_ID

SystemTests.CAPITests runs it against a replayd that answers the picker and the pairing prompt with
its test answers, and checks its one JSON line.
"""
import ctypes
import json
import sys
import threading
import time

lib = ctypes.CDLL(sys.argv[1])
COMPLETION = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
lib.ork_start_broadcast.argtypes = [ctypes.c_char_p, COMPLETION, ctypes.c_void_p]
for name in ["ork_pause_broadcast", "ork_resume_broadcast", "ork_finish_broadcast"]:
    getattr(lib, name).argtypes = [COMPLETION, ctypes.c_void_p]
lib.ork_is_broadcasting.restype = ctypes.c_bool
lib.ork_is_broadcast_paused.restype = ctypes.c_bool
lib.ork_broadcast_url.restype = ctypes.c_int32
lib.ork_broadcast_url.argtypes = [ctypes.c_char_p, ctypes.c_int32]

outcome = {}


def call(name, *arguments):
    done = threading.Event()
    result = {}

    @COMPLETION
    def finished(code, message, user_data):
        result["code"] = code
        result["message"] = message.decode() if message else None
        done.set()

    getattr(lib, name)(*arguments, finished, None)
    result["answered"] = done.wait(60)
    return result


outcome["start"] = call("ork_start_broadcast", sys.argv[2].encode())
outcome["broadcasting"] = lib.ork_is_broadcasting()
url = ctypes.create_string_buffer(256)
deadline = time.time() + 20
while lib.ork_broadcast_url(url, len(url)) == 0 and time.time() < deadline:
    time.sleep(0.1)
outcome["url"] = url.value.decode()
outcome["pause"] = call("ork_pause_broadcast")
outcome["paused"] = lib.ork_is_broadcast_paused()
outcome["resume"] = call("ork_resume_broadcast")
outcome["pausedAfterResume"] = lib.ork_is_broadcast_paused()
outcome["finish"] = call("ork_finish_broadcast")
outcome["broadcastingAfterFinish"] = lib.ork_is_broadcasting()
outcome["finishAgain"] = call("ork_finish_broadcast")
print(json.dumps(outcome))
