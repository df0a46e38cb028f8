#!/usr/bin/python3
"""A libpulse client playing a sine until killed: tone.py FREQUENCY [--volume 0..1]
It writes 16-bit stereo at 48 kHz into `pacat` (pulseaudio-utils), which plays it on the default sink
(through pipewire-pulse in the Wayland tests). Prints "playing" once pacat is started (its stream
shows up a moment later)."""
import argparse
import math
import struct
import subprocess
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('frequency', type=float)
parser.add_argument('--volume', type=float, default=0.4)
args = parser.parse_args()

RATE = 48000
# One second holds a whole number of periods for any whole frequency: it repeats without a click.
amplitude = int(32767 * args.volume)
second = b''.join(struct.pack('<hh', s, s) for s in
                  (int(amplitude * math.sin(2 * math.pi * args.frequency * i / RATE)) for i in range(RATE)))
player = subprocess.Popen(['pacat', '--playback', '--raw', '--format=s16le', '--rate=%d' % RATE, '--channels=2',
                           '--latency-msec=100', '--client-name=tone %g Hz' % args.frequency,
                           '--stream-name=tone %g Hz' % args.frequency],
                          stdin=subprocess.PIPE)
print('playing %g Hz' % args.frequency, flush=True)
try:
    while True:
        player.stdin.write(second)  # blocks as pacat plays: paced by the sink's clock
except (BrokenPipeError, KeyboardInterrupt):
    pass
sys.exit(player.wait())
