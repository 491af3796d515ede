#!/usr/bin/env bash
# Print the largest of the integer arguments.
max=$1
for n in "$@"; do
  if [[ $n > $max ]]; then
    max=$n
  fi
done
echo "$max"
