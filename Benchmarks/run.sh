#!/usr/bin/env bash
# make bench: OpenReplayKit's recording pipeline beside ffmpeg (x11grab + libx264, same preset,
# size and frame rate) on the same Xvfb content, in one run, printing CPU-seconds per second of
# video and the ratio. Slow on purpose (minutes): never part of `make test`.
#   BENCH_SECONDS   seconds per measured recording (default 20)
#   BENCH_PAIRS     back-to-back pairs (ours, then ffmpeg) per full-motion and desktop figure (default 3)
#   BENCH_LONG      seconds of the dropped-frames run (default 300; 0 skips it)
#   BENCH_DRIFT     seconds of the A/V drift run (default 0: skipped; 3600 checks "no drift over an hour")
#   BENCH_RING_SECONDS  seconds of the frame ring run (default 10)
#   BENCH_SERVICE   0 skips the broadcast service benchmarks (Benchmarks/service/run.sh)
#   BENCH_APP       0 skips issue 13's in-app figures (Benchmarks/app.sh: capture latency, the app's
#                   CPU, replayd app vs system recording, the clip buffer's memory)
#   BENCH_BROADCAST 0 skips issue 16's broadcast figures (Benchmarks/broadcast.sh: start -> first frame
#                   at the ingest, the upload extension's memory, replayd + extension CPU beside ffmpeg)
#   BENCH_EXTENSION 0 skips issue 16's upload-extension figures (Benchmarks/extension.sh: broadcast start
#                   → live at the ingest, both shipped extensions' memory at 1080p30)
#   BENCH_GLASS     0 skips issue 16's viewer figures (Benchmarks/glass.py: broadcast start -> playing in
#                   headless Chromium, glass-to-glass through the reference extension and the service)
#   BENCH_WAYLAND   0 skips issue 27's Wayland figures (Benchmarks/WaylandBench: replayd through the portal
#                   beside GNOME Shell's own recorder on a headless GNOME Shell, 1080p30)
#   BENCH_BEFORE    1 adds, in every pair, ours with libx264 through libavcodec (not told which
#                   macroblocks did not change: the encoder before the damage map), and its ratio
set -euo pipefail
BIN=${ORK_BIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.build/release}
SECONDS_EACH=${BENCH_SECONDS:-20}
LONG=${BENCH_LONG:-300}
PAIRS=${BENCH_PAIRS:-3}
SIZE=1920x1080
FPS=30
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/ork-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_display() {
  local n
  for n in $(seq 140 199); do
    [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] || { echo "$n"; return; }
  done
  echo "no free X display number" >&2; exit 1
}

N=$(free_display)
export DISPLAY=":$N"
Xvfb "$DISPLAY" -screen 0 ${SIZE}x24 -nolisten tcp -noreset >"$WORK/xvfb.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done

# A private PulseAudio: a null sink the test content plays into, for the A/V offset.
mkdir -p "$WORK/pulse"
(cd "$WORK/pulse" && exec env -u DISPLAY HOME="$WORK/pulse" PULSE_RUNTIME_PATH="$WORK/pulse" pulseaudio -n --daemonize=no \
  --exit-idle-time=-1 --system=no --use-pid-file=no --disable-shm=yes \
  -L "module-native-protocol-unix auth-anonymous=1 socket=$WORK/pulse/native" \
  -L 'module-null-sink sink_name=main rate=48000' >"$WORK/pulse/log" 2>&1) &
PIDS+=($!)
export PULSE_SERVER="unix:$WORK/pulse/native" HOME="$WORK/pulse"
for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done

content() {  # content MODE...: (re)starts the test content
  [ -n "${CONTENT_PID:-}" ] && { kill "$CONTENT_PID" 2>/dev/null || true; wait "$CONTENT_PID" 2>/dev/null || true; }
  "$BIN/replay-testcontent" "$@" >"$WORK/content.log" 2>&1 &
  CONTENT_PID=$!
  PIDS+=($CONTENT_PID)
  sleep 1.5
}

ours() {  # ours FILE ARGS...: prints CPU-seconds
  "$BIN/replay-bench" record -o "$1" --duration "$SECONDS_EACH" --fps $FPS "${@:2}" | tee -a "$WORK/ours.log" \
    | sed -n 's/.*cpu_seconds=\([0-9.]*\).*/\1/p'
}

theirs() {  # theirs FILE: ffmpeg's CPU-seconds (user+sys) for the same job
  /usr/bin/time -f "%U %S" -o "$WORK/time" ffmpeg -nostdin -v error -f x11grab -framerate $FPS -video_size $SIZE -i "$DISPLAY" \
    -t "$SECONDS_EACH" -c:v libx264 -preset veryfast -crf 23 -pix_fmt yuv420p -y "$1"
  awk '{ printf "%.3f\n", $1 + $2 }' "$WORK/time"
}

compare() {  # compare NAME TARGET CONTENT-ARGS...: PAIRS back-to-back runs of ours and ffmpeg; the median ratio counts
  local name=$1 goal=$2 slug=${1// /-} i o t b line ratios="" before="" frames=0 dropped=0 ob=0 tb=0 bb=0 full=0
  slug=${slug//+/}
  [[ " ${*:3} " == *" --full-motion "* ]] && full=1
  content "${@:3}"
  for i in $(seq "$PAIRS"); do
    if [ "${BENCH_BEFORE:-0}" = 1 ]; then
      b=$(ours "$WORK/$slug-b$i.mp4" --libavcodec-x264)
      bb=$((bb + $(stat -c %s "$WORK/$slug-b$i.mp4")))
    fi
    o=$(ours "$WORK/$slug-o$i.mp4"); t=$(theirs "$WORK/$slug-t$i.mp4")
    [ "${BENCH_BEFORE:-0}" = 1 ] && before="$before $b $t"
    line=$(grep " frames=" "$WORK/ours.log" | tail -n 1)
    frames=$((frames + $(sed -n 's/.* frames=\([0-9]*\).*/\1/p' <<<"$line")))
    dropped=$((dropped + $(sed -n 's/.*dropped=\([0-9]*\).*/\1/p' <<<"$line")))
    ob=$((ob + $(stat -c %s "$WORK/$slug-o$i.mp4"))); tb=$((tb + $(stat -c %s "$WORK/$slug-t$i.mp4")))
    ratios="$ratios $o $t"
  done
  # The ratio counts only if we wrote every frame that was due; and, where the whole screen moves
  # (--full-motion), only if the content drew at least 97% of its frames: we encode a picture only when the
  # screen changed, so a content starved of CPU would cost us less while ffmpeg encodes every tick.
  # The files' sizes show how much motion each side saw: the content is drawn on its own clock, and
  # how far it moves between two grabs depends on how the machine schedules it. So does the CPU time
  # of both: each pair runs back to back, and the median of the pairs' ratios is the figure (every
  # pair is printed).
  awk -v name="$name" -v s="$SECONDS_EACH" -v goal="$goal" -v f="$frames" -v d="$dropped" -v full="$full" -v fps=$FPS \
      -v ob="$ob" -v tb="$tb" -v runs="$ratios" 'BEGIN {
    k = split(runs, v, " "); p = k / 2; list = ""
    for (i = 1; i <= p; i++) { r[i] = v[2 * i - 1] / v[2 * i]; so += v[2 * i - 1]; st += v[2 * i]; list = list sprintf("%s%.2f", (i > 1 ? " " : ""), r[i]) }
    for (i = 1; i <= p; i++) for (j = i + 1; j <= p; j++) if (r[j] < r[i]) { x = r[i]; r[i] = r[j]; r[j] = x }
    m = (p % 2 ? r[(p + 1) / 2] : (r[p / 2] + r[p / 2 + 1]) / 2)
    printf "%-28s ours %6.3f CPU-s/s   ffmpeg %6.3f CPU-s/s   ratio %.2f, median of %d pairs [%s] (target <= %s; ours %d frames in all, %d dropped, %.1f MB a file; ffmpeg %.1f MB) %s\n",
      name, so / (p * s), st / (p * s), m, p, list, goal, f, d, ob / (p * 1e6), tb / (p * 1e6),
      (m <= goal && d == 0 && (!full || f >= 0.97 * p * s * fps) ? "OK" : "MISSED") }'
  [ -n "$before" ] && awk -v name="$name" -v s="$SECONDS_EACH" -v bb="$bb" -v runs="$before" 'BEGIN {
    k = split(runs, v, " "); p = k / 2; list = ""
    for (i = 1; i <= p; i++) { r[i] = v[2 * i - 1] / v[2 * i]; so += v[2 * i - 1]; list = list sprintf("%s%.2f", (i > 1 ? " " : ""), r[i]) }
    for (i = 1; i <= p; i++) for (j = i + 1; j <= p; j++) if (r[j] < r[i]) { x = r[i]; r[i] = r[j]; r[j] = x }
    m = (p % 2 ? r[(p + 1) / 2] : (r[p / 2] + r[p / 2 + 1]) / 2)
    printf "%-28s ours %6.3f CPU-s/s   ratio %.2f, median of %d pairs [%s] (%.1f MB a file)\n",
      "  before (libavcodec x264)", so / (p * s), m, p, list, bb / (p * 1e6) }'
  return 0
}

echo "== OpenReplayKit benchmarks: ${SIZE}@${FPS}, ${SECONDS_EACH} s each, display $DISPLAY"
"$BIN/replay-bench" convert --frames 100
# In-app capture's transport: 1080p30 NV12 and two sound streams through the frame ring to an app
# process (replay-ring read, OpenReplayKit's sample buffers); the app's CPU and the writer's cost.
"$BIN/replay-ring" bench --seconds "${BENCH_RING_SECONDS:-10}"
# An app capturing, recording and clip-buffering itself through a real replayd, beside the system
# recording of the same content (a display, sound server and replayd of their own).
if [ "${BENCH_APP:-1}" != 0 ]; then
  ORK_BIN_DIR="$BIN" bash "$HERE/app.sh"
fi
# Issue 16's upload extensions: system broadcasts through the reference-service extension to a real
# broadcast-service and through the RTMP extension to nginx-rtmp (start → live, each one's memory at 1080p30).
if [ "${BENCH_EXTENSION:-1}" != 0 ]; then
  ORK_BIN_DIR="$BIN" bash "$HERE/extension.sh"
fi

if [ "${BENCH_BROADCAST:-1}" != 0 ]; then
  echo
  ORK_BIN_DIR="$BIN" bash "$HERE/broadcast.sh"
fi
# Issue 16 as a viewer sees it: start -> playing in headless Chromium, glass-to-glass through our
# own extension and the reference service.
if [ "${BENCH_GLASS:-1}" != 0 ]; then
  echo
  ORK_BIN_DIR="$BIN" python3 "$HERE/glass.py"
fi

# Issue 27 on Wayland: replayd through the portal beside GNOME Shell's own recorder on a headless
# GNOME Shell, the same content for both (Benchmarks/WaylandBench).
if [ "${BENCH_WAYLAND:-1}" != 0 ]; then
  echo
  ORK_BIN_DIR="$BIN" "$BIN/replay-wayland-bench" --seconds "${BENCH_WAYLAND_SECONDS:-10}" --pairs "${BENCH_WAYLAND_PAIRS:-3}"
fi

compare "full motion 1080p30" 0.75 --full-motion --no-audio
compare "typical desktop" 0.30 --desktop --no-audio
compare "still + small animation" 0.30 --small-animation --no-audio

content --static --no-audio
o=$(ours "$WORK/o3.mp4"); t=$(theirs "$WORK/t3.mp4")
steady=$(sed -n 's/.*steady_cores=\([0-9.]*\).*/\1/p' "$WORK/ours.log" | tail -n 1)
awk -v o="$o" -v t="$t" -v s="$SECONDS_EACH" -v k="$steady" 'BEGIN {
  printf "%-28s ours %6.4f of a core steady (%.4f with start-up)   ffmpeg %6.3f of a core   (target <= 0.03) %s\n",
    "static screen", k, o / s, t / s, (k <= 0.03 ? "OK" : "MISSED") }'

content
"$BIN/replay-bench" record -o "$WORK/av.mp4" --duration "$SECONDS_EACH" --fps $FPS --system-audio >/dev/null
python3 "$HERE/avsync.py" "$WORK/av.mp4" --fps $FPS

if [ "$LONG" -gt 0 ]; then
  content --full-motion --no-audio
  line=$("$BIN/replay-bench" record -o "$WORK/long.mp4" --duration "$LONG" --fps $FPS)
  dropped=$(sed -n 's/.*dropped=\([0-9]*\).*/\1/p' <<<"$line")
  echo "$(printf '%-28s' "${LONG} s full motion 1080p30") $line   (target: 0 dropped) $([ "$dropped" = 0 ] && echo OK || echo MISSED)"
fi

# No drift over an hour: the flash-and-beep content recorded for BENCH_DRIFT seconds on a small
# screen of its own (the media clock is under test, not the encoder), its first and last minutes
# measured like the A/V offset above. Both clocks are CLOCK_MONOTONIC, so the flash-to-frame
# quantisation is the same in both windows and any difference is the pipeline's own drift.
DRIFT=${BENCH_DRIFT:-0}
if [ "$DRIFT" -gt 0 ]; then
  M=$(free_display)
  Xvfb ":$M" -screen 0 640x360x24 -nolisten tcp -noreset >"$WORK/xvfb-drift.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do DISPLAY=":$M" xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
  SCREEN=$DISPLAY; export DISPLAY=":$M"
  content
  echo "$(printf '%-28s' "A/V drift") recording ${DRIFT} s at 640x360 on $DISPLAY (started $(date +%H:%M))..."
  # An hour is too long to lose silently: a failing step is reported and the recording kept.
  failed=0
  line=$("$BIN/replay-bench" record -o "$WORK/drift.mp4" --duration "$DRIFT" --fps $FPS --system-audio) || failed=$?
  export DISPLAY=$SCREEN
  first=$(python3 "$HERE/avsync.py" "$WORK/drift.mp4" --fps $FPS --start 5 --length 60 --label "A/V offset, first minute") || failed=$?
  last=$(python3 "$HERE/avsync.py" "$WORK/drift.mp4" --fps $FPS --start $((DRIFT - 65)) --length 60 --label "A/V offset, last minute") || failed=$?
  echo "$first"; echo "$last"
  if [ "$failed" != 0 ]; then
    kept=/tmp/ork-drift-$(date +%Y%m%d-%H%M%S).mp4
    cp "$WORK/drift.mp4" "$kept" 2>/dev/null || kept="(no file)"
    echo "$(printf '%-28s' "A/V drift") a step failed (status $failed; recording: ${line:-no report}); the recording is kept at $kept MISSED"
  else
    awk -v a="$(sed -n 's/^[^+-]*\([+-][0-9.]*\) ms.*/\1/p' <<<"$first")" -v b="$(sed -n 's/^[^+-]*\([+-][0-9.]*\) ms.*/\1/p' <<<"$last")" \
        -v s="$DRIFT" -v l="$line" 'BEGIN {
      d = b - a; if (d < 0) d = -d
      printf "%-28s %+.1f ms after %d s (first minute %+.1f, last %+.1f; target: no drift, |change| <= 5 ms) %s\n   %s\n",
        "A/V drift", b - a, s, a, b, (d <= 5 ? "OK" : "MISSED"), l }'
  fi
fi

# The broadcast service: glass-to-glass latency, fan-out and ingest CPU, beside nginx-rtmp.
if [ "${BENCH_SERVICE:-1}" != 0 ]; then
  echo
  ORK_BIN_DIR="$BIN" bash "$HERE/service/run.sh"
fi
