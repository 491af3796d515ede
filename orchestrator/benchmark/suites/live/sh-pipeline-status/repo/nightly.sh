#!/usr/bin/env bash
# nightly.sh LOG...: the job that sends each log's error report (here it prints it).
for log in "$@"; do
  echo "== $log"
  bash report.sh "$log" || { echo "report failed for $log" >&2; exit 1; }
done
