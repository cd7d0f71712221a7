#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying build/ab/{B,C}.so: the reduction's backward
# kernels of two builds in alternating processes (library_ab.py --case backward), then with
# build C every GPU test and the reduction's benchmark (one run). Logs go to $OUT.
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
for v in B C B C; do
  cp "build/ab/$v.so" custom_op/_C.abi3.so
  python3 tools/h200/library_ab.py "$v" --case backward
done | tee "$out/library-ab-backward.txt"
python3 -m pytest tests/ops -m gpu -q -rs -p no:cacheprovider -n 8 > "$out/pytest-gpu.log" 2>&1
echo "pytest exit $?: $(tail -1 "$out/pytest-gpu.log")"
python3 -m bench --device cuda --op weighted_sum_of_squares --out /tmp/bench-c > "$out/bench.log" 2>&1
echo "bench exit $?"
tar czf "$out/bench-c.tgz" -C /tmp bench-c
grep -E "^\[(met |MISS)\]" "$out/bench.log"
