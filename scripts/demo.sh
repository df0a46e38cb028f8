#!/usr/bin/env bash
# make demo: record 10 s of a real screen with OpenReplayKit and say where the movie is; then, on
# a virtual display, SketchPad (Examples/SketchPad), an app that records itself, driven with xdotool:
# strokes with their tones, Record, the consent prompt answered, Stop, the preview saved; then
# broadcast the same screen live to the reference broadcast service on loopback through our own
# upload extension (org.openreplaykit.reference) and say where the viewer page is.
# On a Wayland desktop it records through the desktop's screen-cast portal (`replay doctor` first).
# With a working $DISPLAY it records that display (and its sound, when PulseAudio runs). Without
# one, it starts its own: a virtual X display (Xvfb) showing moving test content (colour bars, a
# frame counter, a flash and a beep each second), with sound on a private PulseAudio.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${ORK_BIN_DIR:-$ROOT/.build/release}
BROADCAST_SECONDS=${DEMO_BROADCAST_SECONDS:-30}
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

# A private runtime folder: this demo's own replayd, beside any the user runs. libpulse finds the
# user's sound server under XDG_RUNTIME_DIR too: name the one that answers now, before moving it.
if [ -z "${PULSE_SERVER:-}" ] && SERVER=$(pactl info 2>/dev/null | sed -n 's/^Server String: //p') && [ -n "$SERVER" ]; then
  case "$SERVER" in /*) SERVER="unix:$SERVER" ;; esac
  export PULSE_SERVER="$SERVER"
fi
export XDG_RUNTIME_DIR="$OUT/runtime"
# Where the preview's Save puts an app's recording (replayd's Videos folder).
export XDG_VIDEOS_DIR="$OUT"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

if [ -n "${WAYLAND_DISPLAY:-}" ] && [ "${XDG_SESSION_TYPE:-wayland}" != x11 ]; then
  # A Wayland desktop: the person's recordings go through its screen-cast portal (never XWayland).
  say "Recording your Wayland desktop through its screen-cast portal: the first time, the desktop asks which screen to share"
  "$BIN/replay" doctor || { echo "demo: this desktop cannot record yet: see what replay doctor says above" >&2; exit 1; }
elif [ -n "${DISPLAY:-}" ] && xdpyinfo >/dev/null 2>&1; then
  say "Recording your display $DISPLAY"
else
  for n in $(seq 60 99); do
    [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] || break
  done
  export DISPLAY=":$n"
  VIRTUAL=1
  say "No display here: starting a virtual one ($DISPLAY, 1280x720) with moving content and sound"
  Xvfb "$DISPLAY" -screen 0 1280x720x24 -nolisten tcp -noreset >"$OUT/xvfb.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
  xdpyinfo >/dev/null 2>&1 || { echo "demo: Xvfb did not start; see $OUT/xvfb.log" >&2; exit 1; }

  PULSE_DIR="$OUT/pulse"
  rm -rf "$PULSE_DIR" && mkdir -p "$PULSE_DIR"
  (cd "$PULSE_DIR" && exec env -u DISPLAY HOME="$PULSE_DIR" PULSE_RUNTIME_PATH="$PULSE_DIR" pulseaudio -n --daemonize=no \
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

# SketchPad, on the virtual display only (it takes the pointer and the keyboard): an app records
# itself as a person would have it do, through the system windows replayd shows.
if [ -n "${VIRTUAL:-}" ] && [ -x "$BIN/sketchpad" ]; then
  say "SketchPad (Examples/SketchPad) records itself: strokes with a tone each, Record, consent, Stop, the preview's Save"
  LOG="$OUT/sketchpad.log"
  "$BIN/sketchpad" >"$LOG" 2>&1 &
  SKETCHPAD=$!
  PIDS+=($SKETCHPAD)
  window_of() {  # window_of CLASS: the visible window of that WM_CLASS instance (waits up to 20 s)
    local w
    for _ in $(seq 200); do
      w=$(xdotool search --onlyvisible --classname "$1" 2>/dev/null | head -n 1)
      [ -n "$w" ] && { echo "$w"; return 0; }
      sleep 0.1
    done
    return 1
  }
  printed() { grep -q "^sketchpad: $1\$" "$LOG"; }
  stroke() {  # stroke X1 Y1 X2 Y2 in SketchPad's window: a drag with the left button, as a hand draws
    xdotool mousemove --window "$SK" --sync "$1" "$2" mousedown 1
    for i in $(seq 15); do
      xdotool mousemove --window "$SK" $(($1 + ($3 - $1) * i / 15)) $(($2 + ($4 - $2) * i / 15)); sleep 0.02
    done
    xdotool mouseup 1
  }
  SK=$(window_of sketchpad) || { echo "demo: SketchPad's window did not show; see $LOG" >&2; exit 1; }
  sleep 0.5
  xdotool mousemove --window "$SK" --sync 430 320 key ctrl+r
  # The app's first start: replayd asks the person (Return = Allow). An answer given in the last
  # 8 minutes holds, and then no prompt comes.
  for _ in $(seq 200); do
    printed recording && break
    if PROMPT=$(xdotool search --onlyvisible --classname openreplaykit-consent 2>/dev/null | head -n 1) && [ -n "$PROMPT" ]; then
      sleep 0.5
      echo "    the consent prompt is up: Return (Allow)"
      xdotool mousemove --window "$PROMPT" --sync 30 30 key Return
      sleep 0.5
    fi
    sleep 0.1
  done
  printed recording || { echo "demo: SketchPad did not start recording; see $LOG" >&2; exit 1; }
  stroke 120 160 700 160; sleep 0.6
  stroke 120 260 700 420; sleep 0.6
  stroke 120 420 700 260; sleep 1.5
  xdotool mousemove --window "$SK" --sync 430 320 key ctrl+t
  PREVIEW=$(window_of openreplaykit-preview) || { echo "demo: no preview window; see $LOG" >&2; exit 1; }
  sleep 1.5
  echo "    the preview is up: Ctrl+S (Save)"
  xdotool mousemove --window "$PREVIEW" --sync 40 40 key ctrl+s
  for _ in $(seq 200); do grep -q '^sketchpad: saved ' "$LOG" && break; sleep 0.1; done
  APP_FILE=$(sed -n 's/^sketchpad: saved //p' "$LOG" | tail -n 1)
  [ -n "$APP_FILE" ] || { echo "demo: the preview did not save; see $LOG" >&2; exit 1; }
  kill "$SKETCHPAD" 2>/dev/null || true
  say "What SketchPad recorded of itself (ffprobe):"
  ffprobe -v error -show_entries stream=codec_type,codec_name,width,height,sample_rate,duration -of compact=p=0:nk=0 "$APP_FILE" || true
  echo
  echo "SketchPad's recording: $APP_FILE"
  echo "Its events:            $LOG"
fi

# The broadcast: the reference service (embedded SQLite) and an account; then `replay broadcast`
# through the reference-service extension (org.openreplaykit.reference, Extensions/Reference), which
# signs in with the account, creates the broadcast, publishes this display (and its sound) over
# RTMP, and gives back the viewer page's URL.
SERVICE="$OUT/service"
# A fresh service each time (the account's password is made anew below).
rm -rf "$SERVICE"
mkdir -p "$SERVICE"
DB="$SERVICE/service.sqlite"
say "Starting broadcast-service on 127.0.0.1 (database $DB)"
"$BIN/broadcast-service" --host 127.0.0.1 --port 0 --rtmp-port 0 --database "$DB" >"$SERVICE/stdout.log" 2>"$SERVICE/service.log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^ready ' "$SERVICE/stdout.log" 2>/dev/null && break; sleep 0.1; done
READY=$(grep '^ready ' "$SERVICE/stdout.log" || true)
[ -n "$READY" ] || { echo "demo: broadcast-service did not start; see $SERVICE/service.log" >&2; exit 1; }
HTTP_PORT=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' <<<"$READY")
PASSWORD="demo-password-$RANDOM$RANDOM"
printf '%s\n' "$PASSWORD" | "$BIN/broadcast-service" user create demo --database "$DB" >/dev/null 2>&1 || true

say "printf 'user=demo\\npassword=…\\n' | replay broadcast --service org.openreplaykit.reference --setup server=http://127.0.0.1:$HTTP_PORT --setup-file - --setup title=\"OpenReplayKit demo\""
# The password on standard input: the command line is readable by every user.
printf 'user=demo\npassword=%s\n' "$PASSWORD" | "$BIN/replay" broadcast --service org.openreplaykit.reference \
  --setup "server=http://127.0.0.1:$HTTP_PORT" --setup-file - --setup "title=OpenReplayKit demo" \
  >"$SERVICE/broadcast.out" 2>"$SERVICE/broadcast.err" &
BROADCAST=$!
PIDS+=($BROADCAST)
PAGE=""
for _ in $(seq 150); do
  PAGE=$(grep -m 1 '^http' "$SERVICE/broadcast.out" 2>/dev/null || true)
  if [ -n "$PAGE" ] && curl -fsS "http://127.0.0.1:$HTTP_PORT/api/live" 2>/dev/null | grep -q '"live":true'; then break; fi
  kill -0 "$BROADCAST" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$PAGE" ] || ! curl -fsS "http://127.0.0.1:$HTTP_PORT/api/live" 2>/dev/null | grep -q '"live":true'; then
  echo "demo: the broadcast did not go live; see $SERVICE/broadcast.err, $SERVICE/service.log and $OUT/runtime/openreplaykit/extension-org.openreplaykit.reference.log" >&2
  cat "$SERVICE/broadcast.err" >&2
  exit 1
fi
sleep 3
FRAME="$OUT/broadcast-frame.png"
# The 16th picture of the stream, not its first: the test content flashes white once a second, the
# flash makes libx264 start a new keyframe, and HLS segments start on keyframes (the first picture
# was the white flash).
ffmpeg -nostdin -v error -y -i "${PAGE/\/b\//\/hls\/}/index.m3u8" -vf "select=gte(n\,15)" -frames:v 1 "$FRAME" 2>/dev/null || FRAME=""
echo
echo "Recording:    $FILE"
[ -n "${APP_FILE:-}" ] && echo "SketchPad:    $APP_FILE"
echo "Viewer page:  $PAGE"
echo "Directory:    http://127.0.0.1:$HTTP_PORT/   (sign up there to chat and like)"
echo "HLS:          ${PAGE/\/b\//\/hls\/}/index.m3u8"
[ -n "$FRAME" ] && echo "A frame:      $FRAME (from the HLS stream)"
if [ -t 0 ]; then
  say "Live now. Press Enter to end the broadcast."
  read -r _
else
  say "Live for $BROADCAST_SECONDS s (DEMO_BROADCAST_SECONDS), then everything stops."
  sleep "$BROADCAST_SECONDS"
fi
say "replay stop"
"$BIN/replay" stop || true
if ! wait "$BROADCAST"; then
  echo "demo: the broadcast ended with an error (its log: $OUT/runtime/openreplaykit/extension-org.openreplaykit.reference.log):" >&2
  grep '^replay:' "$SERVICE/broadcast.err" >&2 || true
  exit 1
fi
echo "What \`replay broadcast\` said while it ran (its standard error, in order):"
grep '^replay:' "$SERVICE/broadcast.err" | sed 's/^/    /' || true
