#!/usr/bin/env bash
source ./lib.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'a\n' > "$work/plain.txt"
printf 'b\n' > "$work/my notes.txt"
bash backup.sh "$work/out" "$work/plain.txt" "$work/my notes.txt" || fail "backup.sh exited $?"
[ -f "$work/out/plain.txt" ] || fail "plain.txt was not copied"
[ -f "$work/out/my notes.txt" ] || fail "'my notes.txt' was not copied"
echo "2 passed, 0 failed"
