#!/usr/bin/env bash
# make bench, issue 16's upload-extension figures: system broadcasts at 1080p30 of full-motion
# content through both shipped upload extensions (release builds), with replayd already running:
#  - the reference-service extension (org.openreplaykit.reference) to a real broadcast-service on
#    loopback (default bcrypt cost): broadcast start → live at the ingest, from `replay broadcast`
#    to the service's broadcast object saying live (the extension signed in, created the broadcast
#    and its first picture was published), polled every 10 ms;
#  - the RTMP extension (org.openreplaykit.rtmp) to a private nginx-rtmp: broadcast start → first
#    picture decoded by an ffmpeg player that was waiting on the stream key (with its probing of both
#    tracks: Benchmarks/broadcast.sh measures the start itself);
#  - for each, the extension's memory while it streams: Private_Dirty (what replayd's 50 MB limit
#    counts) and VmRSS (with shared libraries' clean pages), sampled every 0.5 s, their peaks.
#   BENCH_EXT_RUNS     broadcasts per extension (default 3)
#   BENCH_EXT_SECONDS  seconds each streams after going live (default 15)
#   BENCH_EXT_SMAPS    a folder: each run's /proc/PID/smaps at its Private_Dirty peak is kept there
#                      (EXTENSION-RUN.smaps), to see which mappings the memory is in
set -euo pipefail
BIN=${ORK_BIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.build/release}
RUNS=${BENCH_EXT_RUNS:-3}
SECS=${BENCH_EXT_SECONDS:-15}
. "$(dirname "$0")/bench-env.sh"
bench_work ork-extbench
bench_display 240 279 1920x1080
bench_sound
bench_nginx
mkdir -p "$WORK/service"
"$BIN/replay-testcontent" --full-motion >"$WORK/content.log" 2>&1 &
PIDS+=($!)

DB="$WORK/service/service.sqlite"
"$BIN/broadcast-service" --host 127.0.0.1 --port 0 --rtmp-port 0 --database "$DB" >"$WORK/service/stdout.log" 2>"$WORK/service/log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^ready ' "$WORK/service/stdout.log" 2>/dev/null && break; sleep 0.1; done
HTTP=$(sed -n 's/^ready .*http=\([0-9]*\).*/\1/p' "$WORK/service/stdout.log")
printf '%s\n' bench-password-1 | "$BIN/broadcast-service" user create bench --database "$DB" >/dev/null

# A freshly built program's pages stay dirty in the page cache until written back, and smaps counts
# them in Private_Dirty of the one process that maps them (up to 6 MB of the extension's text): the
# figure is the extension's own memory, as after an install that has reached the disk.
sync

# A memory limit above what it uses, so that the peak is measured over the whole run; the figure
# says whether replayd's default limit (50 MB) would have stopped it.
bench_replayd --extension-memory-mb 400

extension_pid() {  # extension_pid PRODUCT
  local p
  for p in $(pgrep -x "${1:0:15}" 2>/dev/null || true); do
    [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$BIN/$1")" ] && { echo "$p"; return; }
  done
}

# memory PID NAME RUN: samples the extension every 0.5 s for SECS seconds; prints "dirty-kB rss-kB",
# the peaks (and keeps the smaps at the Private_Dirty peak in BENCH_EXT_SMAPS).
memory() {
  local pid=$1 dirty=0 rss=0 d r
  for _ in $(seq $((SECS * 2))); do
    d=$(awk '/^Private_Dirty:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)
    r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
    if [ "${d:-0}" -gt "$dirty" ]; then
      dirty=$d
      [ -n "${BENCH_EXT_SMAPS:-}" ] && { mkdir -p "$BENCH_EXT_SMAPS"; cat "/proc/$pid/smaps" >"$BENCH_EXT_SMAPS/$2-$3.smaps" 2>/dev/null || true; }
    fi
    [ "${r:-0}" -gt "$rss" ] && rss=$r
    sleep 0.5
  done
  echo "$dirty $rss"
}

report() {  # report NAME RUN START LIVE DIRTY RSS WHAT [TARGET-MS]
  awk -v s="$3" -v l="$4" -v d="$5" -v r="$6" -v n="$2" -v name="$1" -v what="$7" -v t="${8:-}" 'BEGIN {
    printf "%-28s run %d: start → %s %5.0f ms%s; extension Private_Dirty peak %.1f MB (target <= 40) %s%s, VmRSS %.1f MB\n",
      name, n, what, (l - s) * 1000, (t == "" ? "" : sprintf(" (target <= %d) %s", t, ((l - s) * 1000 <= t ? "OK" : "MISSED"))),
      d / 1024, (d / 1024 <= 40 ? "OK" : "MISSED"),
      (d / 1024 > 50 ? " (over replayd'"'"'s default limit of 50 MB: it would be stopped)" : ""), r / 1024 }'
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
  read -r dirty rss < <(memory "$(extension_pid replay-extension-reference)" reference "$run")
  "$BIN/replay" stop >/dev/null 2>&1 || true
  if ! wait "$CLI"; then
    echo "extension bench: run $run ended in an error: $(grep '^replay:' "$WORK/err.$run" | tail -n 1)" >&2
  fi
  report "reference extension 1080p30" "$run" "$start" "$live" "$dirty" "$rss" "live at the ingest" 1000
  sleep 1
done

for run in $(seq "$RUNS"); do
  key="bench$run"
  # A player waiting on the key: exits once it decoded one picture.
  ffmpeg -nostdin -v error -fflags nobuffer -rw_timeout 20000000 \
    -i "$INGEST/$key" -frames:v 1 -f null - >/dev/null 2>&1 &
  PLAYER=$!
  sleep 0.5
  start=$(date +%s.%N)
  "$BIN/replay" broadcast --service org.openreplaykit.rtmp --setup "url=$INGEST" --setup "key=$key" \
    >"$WORK/rtmp-out.$run" 2>"$WORK/rtmp-err.$run" &
  CLI=$!
  live=""
  for _ in $(seq 2000); do
    kill -0 "$PLAYER" 2>/dev/null || { live=$(date +%s.%N); break; }
    kill -0 "$CLI" 2>/dev/null || break
    sleep 0.01
  done
  kill "$PLAYER" 2>/dev/null || true
  [ -n "$live" ] || { echo "extension bench: RTMP run $run showed no picture at the ingest: $(cat "$WORK/rtmp-err.$run")" >&2; exit 1; }
  read -r dirty rss < <(memory "$(extension_pid replay-extension-rtmp)" rtmp "$run")
  "$BIN/replay" stop >/dev/null 2>&1 || true
  if ! wait "$CLI"; then
    echo "extension bench: RTMP run $run ended in an error: $(grep '^replay:' "$WORK/rtmp-err.$run" | tail -n 1)" >&2
  fi
  report "RTMP extension 1080p30" "$run" "$start" "$live" "$dirty" "$rss" "a player's first picture"
  sleep 1
done
