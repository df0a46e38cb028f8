#!/usr/bin/env bash
# make demo: record 10 s of a real screen with OpenReplayKit and say where the movie is.
# With a working $DISPLAY it records that display (and its sound, when PulseAudio runs). Without
# one, it starts its own: a virtual X display (Xvfb) showing moving test content (colour bars, a
# frame counter, a flash and a beep each second), with sound on a private PulseAudio.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${ORK_BIN_DIR:-$ROOT/.build/release}
OUT="$ROOT/demo-output"
SECONDS_TO_RECORD=${DEMO_SECONDS:-10}
mkdir -p "$OUT"
chmod 700 "$OUT"
PIDS=()
cleanup() {
  if [ -f "$OUT/runtime/openreplaykit/replayd.pid" ]; then
    kill "$(cat "$OUT/runtime/openreplaykit/replayd.pid")" 2>/dev/null || true
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# A private runtime folder: this demo's own replayd, with this demo's display and sound.
export XDG_RUNTIME_DIR="$OUT/runtime"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

if [ -n "${DISPLAY:-}" ] && xdpyinfo >/dev/null 2>&1; then
  say "Recording your display $DISPLAY"
else
  for n in $(seq 60 99); do
    [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] || break
  done
  export DISPLAY=":$n"
  say "No display here: starting a virtual one ($DISPLAY, 1280x720) with moving content and sound"
  Xvfb "$DISPLAY" -screen 0 1280x720x24 -nolisten tcp -noreset >"$OUT/xvfb.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
  xdpyinfo >/dev/null 2>&1 || { echo "demo: Xvfb did not start; see $OUT/xvfb.log" >&2; exit 1; }

  PULSE_DIR="$OUT/pulse"
  rm -rf "$PULSE_DIR" && mkdir -p "$PULSE_DIR"
  (cd "$PULSE_DIR" && HOME="$PULSE_DIR" PULSE_RUNTIME_PATH="$PULSE_DIR" env -u DISPLAY pulseaudio -n --daemonize=no \
    --exit-idle-time=-1 --system=no --use-pid-file=no --disable-shm=yes \
    -L "module-native-protocol-unix auth-anonymous=1 socket=$PULSE_DIR/native" \
    -L 'module-null-sink sink_name=main rate=48000' \
    -L 'module-sine-source source_name=mic frequency=3000 rate=48000' >"$PULSE_DIR/log" 2>&1) &
  PIDS+=($!)
  export PULSE_SERVER="unix:$PULSE_DIR/native" PULSE_COOKIE="$PULSE_DIR/cookie"
  for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done

  "$BIN/replay-testcontent" >"$OUT/testcontent.log" 2>&1 &
  PIDS+=($!)
  sleep 1
fi

FILE="$OUT/Screen Recording $(date '+%Y-%m-%d at %H.%M.%S').mp4"
say "replay record --duration $SECONDS_TO_RECORD -o \"$FILE\""
"$BIN/replay" record --duration "$SECONDS_TO_RECORD" -o "$FILE"

say "What was recorded (ffprobe):"
ffprobe -v error -show_entries stream=codec_type,codec_name,width,height,sample_rate,duration -of compact=p=0:nk=0 "$FILE" || true
echo
echo "Recording: $FILE"
