#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying custom_op/_C.abi3.so: the whole benchmark in
# three processes (python -m bench --runs 3; each finished run stays in $OUT's archive if time runs
# out), then compute-sanitizer initcheck over every kernel of the backward's row-spread tests, with
# its findings counted per kernel (initcheck_kernels.txt), since the log prints only the first 100.
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
start=$SECONDS
timeout "${BENCH_LIMIT_S:-460}" python3 -m bench --device cuda --runs 3 --out /tmp/bench-3-runs \
  > "$out/bench.log" 2>&1
echo "bench exit $? in $((SECONDS - start)) s"
tar czf "$out/bench-3-runs.tgz" -C /tmp bench-3-runs
grep -E "^\[(met |MISS)\]" "$out/bench.log"
start=$SECONDS
compute-sanitizer --tool initcheck --print-limit 100000 --error-exitcode 1 --target-processes all \
  python3 -m pytest tests/ops -m gpu -k "${INITCHECK_FILTER:-many_rows or deterministic}" -x -q \
  -p no:cacheprovider > /tmp/initcheck.log 2>&1
echo "initcheck exit $? in $((SECONDS - start)) s: $(grep -E 'SUMMARY|passed|failed' /tmp/initcheck.log | tail -2 | tr '\n' ' ')"
grep -A1 "Uninitialized" /tmp/initcheck.log | grep -E "^=+ +at " | sed -E 's/^=+ +at //; s/\+0x[0-9a-f]+$//' |
  cut -c1-160 | sort | uniq -c | sort -rn > "$out/initcheck_kernels.txt"
cat "$out/initcheck_kernels.txt"
