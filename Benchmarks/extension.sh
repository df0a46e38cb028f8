#!/usr/bin/env bash
# make bench, issue 16's upload-extension figures: a system broadcast at 1080p30 of full-motion
# content through the reference-service extension (org.openreplaykit.reference) to a real
# broadcast-service on loopback (release builds, default bcrypt cost), with replayd already running:
#  - broadcast start → live at the ingest: from `replay broadcast` to the service's broadcast object
#    saying live (the extension signed in, created the broadcast and its first picture was published),
#    polled every 10 ms;
#  - the extension's memory while it streams: Private_Dirty (what replayd's 50 MB limit counts) and
#    VmRSS (with shared libraries' clean pages), sampled every 0.5 s, their peaks.
#   BENCH_EXT_RUNS     broadcasts (default 3)
#   BENCH_EXT_SECONDS  seconds each streams after going live (default 15)
set -euo pipefail
BIN=${ORK_BIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.build/release}
RUNS=${BENCH_EXT_RUNS:-3}
SECS=${BENCH_EXT_SECONDS:-15}
WORK=$(mktemp -d /tmp/ork-extbench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

for n in $(seq 240 279); do [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] || break; done
export DISPLAY=":$n"
Xvfb "$DISPLAY" -screen 0 1920x1080x24 -nolisten tcp -noreset >"$WORK/xvfb.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
mkdir -p "$WORK/pulse" "$WORK/home" "$WORK/runtime" "$WORK/service"
chmod 700 "$WORK/runtime"
(cd "$WORK/pulse" && exec env -u DISPLAY HOME="$WORK/pulse" PULSE_RUNTIME_PATH="$WORK/pulse" pulseaudio -n --daemonize=no \
  --exit-idle-time=-1 --system=no --use-pid-file=no --disable-shm=yes \
  -L "module-native-protocol-unix auth-anonymous=1 socket=$WORK/pulse/native" \
  -L 'module-null-sink sink_name=main rate=48000' >"$WORK/pulse/log" 2>&1) &
PIDS+=($!)
export PULSE_SERVER="unix:$WORK/pulse/native" PULSE_COOKIE="$WORK/pulse/cookie" HOME="$WORK/home" XDG_RUNTIME_DIR="$WORK/runtime"
export XDG_DATA_HOME="$WORK/home/data"
for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done
"$BIN/replay-testcontent" --full-motion >"$WORK/content.log" 2>&1 &
PIDS+=($!)

DB="$WORK/service/service.sqlite"
"$BIN/broadcast-service" --host 127.0.0.1 --port 0 --rtmp-port 0 --database "$DB" >"$WORK/service/stdout.log" 2>"$WORK/service/log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^ready ' "$WORK/service/stdout.log" 2>/dev/null && break; sleep 0.1; done
HTTP=$(sed -n 's/^ready .*http=\([0-9]*\).*/\1/p' "$WORK/service/stdout.log")
printf '%s\n' bench-password-1 | "$BIN/broadcast-service" user create bench --database "$DB" >/dev/null

# A memory limit above what it uses, so that the peak is measured over the whole run; the figure
# says whether replayd's default limit (50 MB) would have stopped it.
"$BIN/replayd" --idle-exit 0 --extension-memory-mb 400 >"$WORK/replayd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/openreplaykit/replayd.sock" ] && break; sleep 0.1; done

extension_pid() {
  local p
  for p in $(pgrep -x replay-extensio 2>/dev/null || true); do
    [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$BIN/replay-extension-reference")" ] && { echo "$p"; return; }
  done
}

for run in $(seq "$RUNS"); do
  start=$(date +%s.%N)
  "$BIN/replay" broadcast --service org.openreplaykit.reference --setup "server=http://127.0.0.1:$HTTP" \
    --setup user=bench --setup password=bench-password-1 --setup "title=Bench $run" >"$WORK/out.$run" 2>"$WORK/err.$run" &
  CLI=$!
  live=""
  for _ in $(seq 2000); do
    page=$(grep -m 1 '^http' "$WORK/out.$run" 2>/dev/null || true)
    if [ -n "$page" ] && curl -fsS "http://127.0.0.1:$HTTP/api/v1/broadcasts/${page##*/}" 2>/dev/null | grep -q '"live":true'; then
      live=$(date +%s.%N); break
    fi
    kill -0 "$CLI" 2>/dev/null || break
    sleep 0.01
  done
  [ -n "$live" ] || { echo "extension bench: run $run did not go live: $(cat "$WORK/err.$run")" >&2; exit 1; }
  pid=$(extension_pid)
  dirty=0; rss=0
  for _ in $(seq $((SECS * 2))); do
    d=$(awk '/^Private_Dirty:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)
    r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
    [ "${d:-0}" -gt "$dirty" ] && dirty=$d
    [ "${r:-0}" -gt "$rss" ] && rss=$r
    sleep 0.5
  done
  "$BIN/replay" stop >/dev/null 2>&1 || true
  if ! wait "$CLI"; then
    echo "extension bench: run $run ended in an error: $(grep '^replay:' "$WORK/err.$run" | tail -n 1)" >&2
  fi
  awk -v s="$start" -v l="$live" -v d="$dirty" -v r="$rss" -v n="$run" 'BEGIN {
    printf "%-28s run %d: start → live at the ingest %5.0f ms (target <= 1000) %s; extension Private_Dirty peak %.1f MB (target <= 40) %s%s, VmRSS %.1f MB\n",
      "reference extension 1080p30", n, (l - s) * 1000, ((l - s) <= 1 ? "OK" : "MISSED"), d / 1024, (d / 1024 <= 40 ? "OK" : "MISSED"),
      (d / 1024 > 50 ? " (over replayd'"'"'s default limit of 50 MB: it would be stopped)" : ""), r / 1024 }'
  sleep 1
done
