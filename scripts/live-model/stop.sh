#!/usr/bin/env bash
# Stop the live kit's servers started by start.sh.
set -u
home="${LIVE_HOME:-$HOME/.cache/orchestrate-live}"
for pidfile in "$home"/run/*.pid; do
  [ -e "$pidfile" ] || continue
  kill "$(cat "$pidfile")" 2>/dev/null && echo "stopped $(basename "$pidfile" .pid)"
  rm -f "$pidfile"
done
