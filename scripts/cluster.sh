#!/usr/bin/env bash
# scripts/cluster.sh up|down|status: the reference broadcast service on three nodes on this machine
# (docs/SCALING.md): a private PostgreSQL 15 cluster in a folder, three `broadcast-service` processes
# on loopback ports sharing it and one signing-key file, and HAProxy in front of them — HTTP and
# WebSocket on one port, RTMP on another (`mode tcp`).
#
#   scripts/cluster.sh up      # start (or restart what is not running); prints the URLs
#   scripts/cluster.sh down    # stop the processes this script started; the data stays
#   scripts/cluster.sh status
#
# Environment: ORK_BIN_DIR (where broadcast-service is; default .build/debug, then .build/release),
# ORK_CLUSTER_DIR (state folder; default /tmp/ork-cluster-UID), ORK_CLUSTER_HTTP_PORT (8080), ORK_CLUSTER_RTMP_PORT
# (1935), ORK_CLUSTER_PG_PORT (15432), ORK_CLUSTER_NODE_HTTP_BASE / _RTMP_BASE (18080 / 19350: the nodes
# listen on 127.0.0.1:18081-18083 for HTTP and 127.0.0.1:19351-19353 for RTMP). Needs postgresql (15) and haproxy (scripts/bootstrap.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Under /tmp by default: PostgreSQL, run as its own user when this script runs as root, must reach it.
DIR=${ORK_CLUSTER_DIR:-${TMPDIR:-/tmp}/ork-cluster-$(id -u)}
HTTP_PORT=${ORK_CLUSTER_HTTP_PORT:-8080}
RTMP_PORT=${ORK_CLUSTER_RTMP_PORT:-1935}
PG_PORT=${ORK_CLUSTER_PG_PORT:-15432}
# Node n listens on NODE_HTTP_BASE + n and NODE_RTMP_BASE + n.
NODE_HTTP_BASE=${ORK_CLUSTER_NODE_HTTP_BASE:-18080}
NODE_RTMP_BASE=${ORK_CLUSTER_NODE_RTMP_BASE:-19350}
PG_BIN=/usr/lib/postgresql/15/bin
NODES=(1 2 3)
DATABASE="postgres://postgres@127.0.0.1:$PG_PORT/postgres"

say() { printf '==> %s\n' "$*"; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

binary() {
  for dir in ${ORK_BIN_DIR:+"$ORK_BIN_DIR"} "$ROOT/.build/debug" "$ROOT/.build/release"; do
    if [ -x "$dir/broadcast-service" ]; then echo "$dir/broadcast-service"; return; fi
  done
  die "no broadcast-service binary: run 'swift build --product broadcast-service' (or set ORK_BIN_DIR)"
}

# PostgreSQL refuses to run as root: then the server runs as the postgres user.
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}

# Whether the process in pid file $1 is running.
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_postgres() {
  [ -x "$PG_BIN/postgres" ] || die "PostgreSQL 15 is not installed ($PG_BIN): run scripts/bootstrap.sh"
  if [ ! -f "$DIR/pgdata/PG_VERSION" ]; then
    say "PostgreSQL: new cluster in $DIR/pgdata"
    mkdir -p "$DIR/pgdata"
    chmod 700 "$DIR/pgdata"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$DIR/pgdata"; fi
    as_postgres "$PG_BIN/initdb" -D "$DIR/pgdata" -A trust -U postgres >"$DIR/initdb.log" 2>&1 \
      || die "initdb failed: see $DIR/initdb.log"
  fi
  if as_postgres "$PG_BIN/pg_ctl" -D "$DIR/pgdata" status >/dev/null 2>&1; then return; fi
  say "PostgreSQL on 127.0.0.1:$PG_PORT"
  as_postgres "$PG_BIN/pg_ctl" -D "$DIR/pgdata" -l "$DIR/pgdata/postgres.log" -w \
    -o "-p $PG_PORT -h 127.0.0.1 -k $DIR/pgdata" start >/dev/null || die "PostgreSQL did not start: see $DIR/pgdata/postgres.log"
}

start_node() {
  local n=$1 bin=$2 pidfile="$DIR/node$1.pid" out="$DIR/node$1.out"
  if running "$pidfile"; then return; fi
  say "node $n: http 127.0.0.1:$((NODE_HTTP_BASE + n)), rtmp 127.0.0.1:$((NODE_RTMP_BASE + n))"
  : >"$out"
  # --behind-https is not given: HAProxy here speaks plain HTTP. Client addresses are HAProxy's, so
  # the per-address connection limit is off.
  nohup "$bin" --host 127.0.0.1 --port $((NODE_HTTP_BASE + n)) --rtmp-port $((NODE_RTMP_BASE + n)) --database "$DATABASE" \
    --signing-key-file "$DIR/signing-keys" --max-connections-per-address 0 >"$out" 2>"$DIR/node$n.log" </dev/null &
  echo $! >"$pidfile"
}

wait_ready() {
  local n=$1
  for _ in $(seq 100); do
    grep -q '^ready ' "$DIR/node$n.out" 2>/dev/null && return
    running "$DIR/node$n.pid" || die "node $n stopped: see $DIR/node$n.log"
    sleep 0.2
  done
  die "node $n is not ready after 20 s: see $DIR/node$n.log"
}

write_haproxy_config() {
  cat >"$DIR/haproxy.cfg" <<EOF
global
    log stderr format raw local0 notice
    # No maxconn: HAProxy derives it from the open-file limit.

defaults
    log global
    retries 2
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # An upgraded WebSocket (viewers, extensions) stays open for as long as the broadcast.
    timeout tunnel 1h

frontend web
    mode http
    bind 127.0.0.1:$HTTP_PORT
    option forwardfor
    acl hls path_beg /hls/
    use_backend hls if hls
    default_backend nodes

# HLS is served by the node that ingests the broadcast (edge nodes do not pull fragments yet): the
# others answer 404, and HAProxy tries the request again on another node. (WebSocket viewers cannot be
# retried so: a refused upgrade is a 400. The player reconnects until it reaches the ingest node.)
backend hls
    mode http
    balance roundrobin
    option httpchk GET /healthz
    retry-on 404 conn-failure empty-response
    retries 2
    option redispatch 1
$(for n in "${NODES[@]}"; do echo "    server node$n 127.0.0.1:$((NODE_HTTP_BASE + n)) check inter 1s fall 2 rise 1"; done)

backend nodes
    mode http
    balance roundrobin
    option httpchk GET /healthz
$(for n in "${NODES[@]}"; do echo "    server node$n 127.0.0.1:$((NODE_HTTP_BASE + n)) check inter 1s fall 2 rise 1"; done)

frontend rtmp
    mode tcp
    bind 127.0.0.1:$RTMP_PORT
    default_backend ingest

backend ingest
    mode tcp
    balance leastconn
$(for n in "${NODES[@]}"; do echo "    server node$n 127.0.0.1:$((NODE_RTMP_BASE + n)) check inter 1s fall 2 rise 1"; done)
EOF
}

up() {
  command -v haproxy >/dev/null || die "haproxy is not installed: run scripts/bootstrap.sh"
  local bin
  bin=$(binary)
  mkdir -p "$DIR"
  # Private, but the postgres user (when run as root) must pass through to its data folder.
  if [ "$(id -u)" -eq 0 ]; then chmod 711 "$DIR"; else chmod 700 "$DIR"; fi
  if [ ! -s "$DIR/signing-keys" ]; then
    # One key shared by the three nodes (a CSRF token made on one is good on the others).
    (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/signing-keys"; echo >>"$DIR/signing-keys")
  fi
  start_postgres
  # The first node migrates the schema; the others find it (an advisory lock makes the order moot).
  for n in "${NODES[@]}"; do start_node "$n" "$bin"; done
  for n in "${NODES[@]}"; do wait_ready "$n"; done
  write_haproxy_config
  haproxy -c -q -f "$DIR/haproxy.cfg" || die "haproxy refuses $DIR/haproxy.cfg"
  if ! running "$DIR/haproxy.pid"; then
    say "HAProxy: http 127.0.0.1:$HTTP_PORT, rtmp 127.0.0.1:$RTMP_PORT"
    haproxy -D -p "$DIR/haproxy.pid" -f "$DIR/haproxy.cfg" 2>"$DIR/haproxy.log" || die "haproxy did not start: see $DIR/haproxy.log"
  fi
  for _ in $(seq 50); do
    curl -fs "http://127.0.0.1:$HTTP_PORT/healthz" >/dev/null && break
    sleep 0.2
  done
  curl -fs "http://127.0.0.1:$HTTP_PORT/healthz" >/dev/null || die "nothing answers on http://127.0.0.1:$HTTP_PORT/healthz"
  cat <<EOF
Cluster up ($DIR).
  web:      http://127.0.0.1:$HTTP_PORT/
  publish:  rtmp://127.0.0.1:$RTMP_PORT/live/STREAM_KEY
  accounts: $bin user create NAME --database $DATABASE   (password on standard input)
  keys:     $bin key create NAME --database $DATABASE
Stop with: scripts/cluster.sh down
EOF
}

stop_pid() {
  local pidfile=$1 name=$2
  if running "$pidfile"; then
    say "stopping $name"
    local pid
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

down() {
  [ -d "$DIR" ] || { echo "cluster: nothing in $DIR"; return; }
  stop_pid "$DIR/haproxy.pid" HAProxy
  for n in "${NODES[@]}"; do stop_pid "$DIR/node$n.pid" "node $n"; done
  if [ -f "$DIR/pgdata/PG_VERSION" ] && as_postgres "$PG_BIN/pg_ctl" -D "$DIR/pgdata" status >/dev/null 2>&1; then
    say "stopping PostgreSQL"
    as_postgres "$PG_BIN/pg_ctl" -D "$DIR/pgdata" -m fast -w stop >/dev/null
  fi
  echo "Cluster down (data kept in $DIR; remove the folder to start afresh)."
}

status() {
  for n in "${NODES[@]}"; do
    if running "$DIR/node$n.pid"; then echo "node $n: running (pid $(cat "$DIR/node$n.pid"))"; else echo "node $n: stopped"; fi
  done
  if running "$DIR/haproxy.pid"; then echo "haproxy: running"; else echo "haproxy: stopped"; fi
  if [ -f "$DIR/pgdata/PG_VERSION" ] && as_postgres "$PG_BIN/pg_ctl" -D "$DIR/pgdata" status >/dev/null 2>&1; then
    echo "postgresql: running"; else echo "postgresql: stopped"; fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: scripts/cluster.sh up|down|status" >&2; exit 2 ;;
esac
