#!/usr/bin/env bash
# Runs one phase of `make test` under a deadline: NAME MINUTES COMMAND…
# A test that hangs then fails the run within minutes, naming the phase and listing what still ran,
# instead of holding CI until its own limit with nothing to read. The phase runs in a session of its
# own, so that the whole tree (swift test, the test process, what it started in its group) is ended.
set -uo pipefail
name=$1 minutes=$2
shift 2
setsid "$@" &
phase=$!
(
  # Ended with the phase, it ends its sleep too: an orphaned sleep kept the phase's output open
  # (a pipe reading it waited out the whole deadline).
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  sleep "$((minutes * 60))" &
  sleeper=$!
  wait "$sleeper"
  echo "make test: the $name did not finish within $minutes minutes: a test hangs. What was still running:" >&2
  ps -eo pid,ppid,pgid,etime,args --sort=start_time | grep -v -E ' (ps -eo|grep -v)' | tail -40 >&2
  kill -TERM -- "-$phase" 2>/dev/null
  sleep 20
  kill -KILL -- "-$phase" 2>/dev/null
) &
watchdog=$!
wait "$phase"
status=$?
kill "$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null
exit "$status"
