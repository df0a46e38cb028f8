#!/usr/bin/env python3
"""A/V offset of a recording of replay-testcontent: each whole second it flashes the screen white
and starts a 1000 Hz beep at the same instant. The offset is the flash's first frame time minus the
beep's onset, averaged; a flash drawn at T shows in the first frame tick at or after T, so half a
frame period is subtracted (the expected quantisation). Pure Python: decoding is ffmpeg's.
With --start/--length it measures only that window of the file (the drift benchmark compares the
first and the last minute of an hour)."""
import argparse, cmath, math, os, struct, subprocess, sys, tempfile

def flashes(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=pts_time",
                          "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout.split()
    times = [float(x.strip(",")) for x in out]
    # Passthrough: one picture per frame of the file. Without it ffmpeg fills the gaps of a variable
    # frame rate with copies, the pictures no longer line up with the times, and each gap before a
    # flash made it look a frame later (runs came out at +50 to +200 ms).
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-vf", "scale=32:18,format=gray", "-fps_mode", "passthrough",
                          "-f", "rawvideo", "-"],
                         capture_output=True, check=True).stdout
    size = 32 * 18
    means = [sum(raw[i:i + size]) / size for i in range(0, len(raw), size)]
    return [times[i] for i in range(1, min(len(times), len(means))) if means[i] > 200 and means[i - 1] <= 200]

def beeps(path, frequency=1000.0, window=240):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-map", "0:a:0", "-ac", "1", "-ar", "48000", "-f", "f32le", "-"],
                         capture_output=True, check=True).stdout
    samples = struct.unpack("<%df" % (len(raw) // 4), raw)
    basis = [cmath.exp(-2j * math.pi * frequency * n / 48000) for n in range(window)]
    power = [abs(sum(samples[i + n] * basis[n] for n in range(window))) for i in range(0, len(samples) - window, window)]
    threshold = max(power) * 0.5
    return [i * window / 48000 for i in range(1, len(power)) if power[i] > threshold and power[i - 1] <= threshold]

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--fps", type=float, default=30)
    parser.add_argument("--start", type=float, help="measure from this second of the file")
    parser.add_argument("--length", type=float, help="for this many seconds")
    parser.add_argument("--label", default="A/V offset")
    args = parser.parse_args()
    path = args.file
    if args.start is not None or args.length is not None:
        # Both tracks of the window, decoded losslessly into one file: they are cut at the same
        # instant, so their offset is the recording's.
        window = tempfile.NamedTemporaryFile(suffix=".mkv", delete=False).name
        cut = ["-ss", str(args.start or 0)] + (["-t", str(args.length)] if args.length else [])
        subprocess.run(["ffmpeg", "-v", "error", "-y"] + cut + ["-i", args.file, "-fps_mode", "passthrough",
                        "-c:v", "ffv1", "-c:a", "pcm_s16le", window], check=True)
        path = window
    try:
        f, b = flashes(path), beeps(path)
    finally:
        if path != args.file:
            os.unlink(path)
    pairs = [(x, min(b, key=lambda y: abs(y - x))) for x in f if b]
    pairs = [(x, y) for x, y in pairs if abs(x - y) < 0.5]
    if not pairs:
        print("%s: no flash/beep pairs found" % args.label); sys.exit(1)
    raw = sum(x - y for x, y in pairs) / len(pairs)
    offset = raw - 0.5 / args.fps
    print("%-28s %+.1f ms (raw %+.1f ms over %d flashes; target |offset| <= 20 ms) %s"
          % (args.label, offset * 1000, raw * 1000, len(pairs), "OK" if abs(offset) <= 0.020 else "MISSED"))

if __name__ == "__main__":
    main()
