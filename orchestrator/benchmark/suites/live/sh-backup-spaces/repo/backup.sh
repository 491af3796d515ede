#!/usr/bin/env bash
# backup.sh DEST FILE...: copy each FILE into DEST, creating DEST if needed.
set -e
dest=$1
shift
mkdir -p "$dest"
for file in "$@"; do
  cp $file "$dest/"
done
echo "backed up $# file(s) to $dest"
