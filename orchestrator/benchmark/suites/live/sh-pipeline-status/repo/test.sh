#!/usr/bin/env bash
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "t1 ERROR db x" "t2 INFO web y" "t3 ERROR db z" > "$work/app.log"
out=$(bash report.sh "$work/app.log") || { echo "FAIL: report.sh failed on a good log"; exit 1; }
[ "$(echo $out)" = "2 db" ] || { echo "FAIL: expected '2 db', got '$out'"; exit 1; }
if bash report.sh "$work/missing.log" >/dev/null 2>&1; then
  echo "FAIL: report.sh exited 0 for a missing log"; exit 1
fi
echo "2 passed, 0 failed"
