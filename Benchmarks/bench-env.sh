# Sourced by the benchmarks that run a whole desktop of their own (app.sh, broadcast.sh,
# extension.sh): a work folder removed at exit with every process started, a display, a private
# PulseAudio, and replayd. BIN (the release builds) must be set first.

# bench_work PREFIX: WORK (a new folder), PIDS, and a trap that stops PIDS and removes WORK.
bench_work() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}

# bench_display FIRST LAST SIZE: Xvfb on the first free display number in FIRST..LAST; exports DISPLAY.
bench_display() {
  local n
  for n in $(seq "$1" "$2"); do [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] || break; done
  export DISPLAY=":$n"
  Xvfb "$DISPLAY" -screen 0 "$3x24" -nolisten tcp -noreset >"$WORK/xvfb.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
}

# bench_sound [MODULE…]: a private PulseAudio with a null sink `main` (and the modules given, each a
# `-L` argument); HOME, XDG_RUNTIME_DIR and XDG_DATA_HOME of their own. Exports the client's variables.
bench_sound() {
  local modules=() module
  for module in "$@"; do modules+=(-L "$module"); done
  mkdir -p "$WORK/pulse" "$WORK/home/Videos" "$WORK/runtime" "$WORK/home/data"
  chmod 700 "$WORK/runtime"
  (cd "$WORK/pulse" && exec env -u DISPLAY HOME="$WORK/pulse" PULSE_RUNTIME_PATH="$WORK/pulse" pulseaudio -n --daemonize=no \
    --exit-idle-time=-1 --system=no --use-pid-file=no --disable-shm=yes \
    -L "module-native-protocol-unix auth-anonymous=1 socket=$WORK/pulse/native" \
    -L 'module-null-sink sink_name=main rate=48000' "${modules[@]}" >"$WORK/pulse/log" 2>&1) &
  PIDS+=($!)
  export PULSE_SERVER="unix:$WORK/pulse/native" PULSE_COOKIE="$WORK/pulse/cookie" HOME="$WORK/home" \
    XDG_RUNTIME_DIR="$WORK/runtime" XDG_DATA_HOME="$WORK/home/data"
  for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done
}

# bench_replayd [ARG…]: replayd (never leaving by itself), waited for; REPLAYD is its pid.
bench_replayd() {
  "$BIN/replayd" --idle-exit 0 "$@" >"$WORK/replayd.log" 2>&1 &
  REPLAYD=$!
  PIDS+=($REPLAYD)
  for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/openreplaykit/replayd.sock" ] && break; sleep 0.1; done
}

# bench_nginx: nginx with the RTMP module on a free loopback port (as the tests' NginxRTMPServer),
# waited for; INGEST is its rtmp://127.0.0.1:PORT/live.
bench_nginx() {
  local port
  mkdir -p "$WORK/nginx/logs" "$WORK/nginx/temp"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat >"$WORK/nginx/nginx.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;
daemon off;
user root;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log info;
events { worker_connections 64; }
rtmp { server { listen 127.0.0.1:$port; chunk_size 4096; application live { live on; record off; } } }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/temp/body; proxy_temp_path $WORK/nginx/temp/proxy;
    fastcgi_temp_path $WORK/nginx/temp/fastcgi; uwsgi_temp_path $WORK/nginx/temp/uwsgi; scgi_temp_path $WORK/nginx/temp/scgi;
}
CONF
  nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" >"$WORK/nginx/stderr" 2>&1 &
  PIDS+=($!)
  INGEST="rtmp://127.0.0.1:$port/live"
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
}
