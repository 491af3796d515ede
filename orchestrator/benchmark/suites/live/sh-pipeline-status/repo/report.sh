#!/usr/bin/env bash
# report.sh LOG: count the ERROR lines of LOG by service.
set -e
log=$1
grep ERROR "$log" | awk '{print $3}' | sort | uniq -c | sort -rn
