"""A test pattern that shows its own capture time: every frame carries the wall clock (milliseconds
since 1970, modulo 2^32) as 32 black/white blocks, and the same bits inverted in a second band
(a reader rejects a frame whose two bands disagree). Raw 8-bit gray frames, paced by the wall clock,
written to the standard input of each command given (each an encoder publishing somewhere), so all
of them get the very same frames at the very same time. A command may also read sound: `{audio}` in
it becomes `pipe:N`, a pipe carrying a 480 Hz tone (s16le, 48 kHz, mono) paced with the frames (1600
samples a frame), so the encoder's audio and video start together (a separately clocked source would
start later, and the muxer's interleaving would hold every frame back by the difference).

    python3 barcode.py --size 640x360 --fps 30 --cmd 'ffmpeg …' --cmd 'ffmpeg …'

The layout is mirrored in latency.js (BITS, band rows).
"""
import argparse
import math
import os
import shlex
import signal
import struct
import subprocess
import time

BITS = 32
BAND = 60  # rows per band: band 1 = bits, band 2 = inverted bits


def frame(width, height, stamp, k):
    block = width // BITS
    ones = [(stamp >> (BITS - 1 - i)) & 1 for i in range(BITS)]
    row = b"".join((b"\xff" if bit else b"\x00") * block for bit in ones).ljust(width, b"\x80")
    inv = b"".join((b"\x00" if bit else b"\xff") * block for bit in ones).ljust(width, b"\x80")
    # Below the bands: mid gray with a moving bar, so the encoder sees motion every frame.
    rest = bytearray(b"\x60" * (width * (height - 2 * BAND)))
    x = (k * 8) % width
    for y in range(height - 2 * BAND):
        rest[y * width + x: y * width + min(width, x + 40)] = b"\xe0" * (min(width, x + 40) - x)
    return row * BAND + inv * BAND + bytes(rest)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="640x360")
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--cmd", action="append", default=[], help="a shell-quoted command reading raw gray frames")
    args = p.parse_args()
    commands = [shlex.split(c) for c in args.cmd]
    width, height = map(int, args.size.split("x"))
    children, audio_pipes = [], []
    for c in commands:
        r, w = os.pipe()
        children.append(subprocess.Popen([a.replace("{audio}", f"pipe:{r}") for a in c], stdin=subprocess.PIPE, pass_fds=(r,)))
        os.close(r)
        audio_pipes.append(os.fdopen(w, "wb") if any("{audio}" in a for a in c) else None)
        if audio_pipes[-1] is None:
            os.close(w)
    samples = 48000 // args.fps
    tone = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 480 * i / 48000))) for i in range(samples))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    start = time.time()
    k = 0
    try:
        while not stop:
            due = start + k / args.fps
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            stamp = int(time.time() * 1000) & 0xFFFFFFFF
            data = frame(width, height, stamp, k)
            for child, audio in zip(children, audio_pipes):
                if audio:
                    audio.write(tone)
                    audio.flush()
                child.stdin.write(data)
                child.stdin.flush()
            k += 1
    except BrokenPipeError:
        pass
    finally:
        for child, audio in zip(children, audio_pipes):
            try:
                if audio:
                    audio.close()
                child.stdin.close()
            except OSError:
                pass
        for child in children:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


if __name__ == "__main__":
    main()
