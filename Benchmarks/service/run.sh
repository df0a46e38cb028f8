#!/usr/bin/env bash
# broadcast-service benchmarks (issue 3, "Benchmarks"), each measured beside nginx-rtmp in the same run:
# glass-to-glass latency in headless Chromium (vs nginx-rtmp HLS), ingest CPU of a 1080p30 6 Mb/s stream,
# fan-out of one 3 Mb/s stream per core (WebSocket viewers vs nginx-rtmp RTMP players).
# One line per figure: ours, the anchor, the ratio/target, OK or MISSED. Takes about 7–9 minutes (the fan-out ramps to thousands of viewers).
#   ORK_BIN_DIR                    where broadcast-service is (default .build/release)
#   BENCH_SERVICE_ONLY             comma list of latency,ingest,thumbnails,fanout (default all)
#   BENCH_THUMBNAIL_SECONDS, BENCH_THUMBNAIL_PAIRS  see thumbbench.py
#   BENCH_SERVICE_LATENCY_SECONDS  measured seconds of playback (default 30)
#   BENCH_SERVICE_INGEST_SECONDS   measured seconds of ingest (default 30)
#   BENCH_SERVICE_FANOUT_STEPS     viewer counts to try, in order (default 100,300,600,1000,1500,2000,2500,3000,4000,5000,6000,7000,8000)
#   BENCH_SERVICE_VERBOSE=1        progress and per-step details on stderr
# Needs: ffmpeg, nginx-light + libnginx-mod-rtmp, chromium, taskset, python3 (standard library), root
# (nginx runs as root from a temporary prefix) and 2 CPUs for the fan-out.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export ORK_BIN_DIR=${ORK_BIN_DIR:-$(cd "$HERE/../.." && pwd)/.build/release}
# Thousands of viewer sockets: raise the descriptor limit for us and the servers we start.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec python3 "$HERE/servicebench.py"
