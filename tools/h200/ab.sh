#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying build/ab/*.so (made by tools/h200/build_ab.py):
# one case of tools/h200/library_ab.py for the given builds in turn, each in its own process
# (e.g. `bash tools/h200/ab.sh elementwise A B A B`), logged to $OUT/library-ab-CASE.txt.
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
case=$1
shift
for v in "$@"; do
  cp "build/ab/$v.so" custom_op/_C.abi3.so
  python3 tools/h200/library_ab.py "$v" --case "$case"
done | tee "$out/library-ab-$case.txt"
