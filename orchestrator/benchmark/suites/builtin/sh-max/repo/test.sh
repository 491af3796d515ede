#!/usr/bin/env bash
# Tests for max.sh; exits non-zero when one fails.
fail=0
check() {
  local want=$1 got
  shift
  got=$(bash max.sh "$@")
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: max.sh $* printed $got, expected $want"
    fail=1
  fi
}
check 10 9 10 2
check 3 3
check -1 -5 -1
exit "$fail"
