#!/usr/bin/env bash
# Tests for count.sh; exits non-zero when one fails.
fail=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf 'one\n\n  \ntwo\n\tthree\n' >"$tmp"
got=$(bash count.sh "$tmp")
if [[ "$got" != 3 ]]; then
  echo "FAIL: count.sh printed $got for a file with 3 non-blank lines"
  fail=1
fi
exit "$fail"
