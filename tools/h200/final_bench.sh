#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying custom_op/_C.abi3.so: the whole benchmark in
# three processes (python -m bench --runs 3, archived in $OUT), then the autograd tests on the GPU.
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout "${BENCH_LIMIT_S:-300}" python3 -m bench --device cuda --runs 3 --out /tmp/bench-3-runs > "$out/bench.log" 2>&1
echo "bench exit $?"
tar czf "$out/bench-3-runs.tgz" -C /tmp bench-3-runs
grep -E "^\[(met |MISS)\]" "$out/bench.log"
python3 -m pytest tests/ops/test_autograd.py -m gpu -q -p no:cacheprovider > "$out/pytest-autograd-gpu.log" 2>&1
echo "pytest exit $?: $(tail -1 "$out/pytest-autograd-gpu.log")"
