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
. "$(dirname "$0")/bench-env.sh"
bench_work ork-extbench
bench_display 240 279 1920x1080
bench_sound
mkdir -p "$WORK/service"
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
bench_replayd --extension-memory-mb 400

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
