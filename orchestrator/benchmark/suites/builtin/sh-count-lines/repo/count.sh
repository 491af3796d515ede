#!/usr/bin/env bash
# Print how many lines of the file named by $1 are not blank.
grep -c '' "$1"
