#!/usr/bin/env bash
# The whole check of one library build on a lent GPU machine, over a checkout carrying
# custom_op/_C.abi3.so, logs and results in $OUT:
#   bench:    every GPU test, then the three-run benchmark (about 4 minutes);
#   sanitize: the four compute-sanitizer tools over the tests of the compiled-length kernel
#             (65536x1024 and 4096x65536, fp32 and fp16, which nox -s sanitize skips as large),
#             then nox -s sanitize's run
#             (tools/h200/sanitize.sh; about 6 minutes).
# A lent machine's call lasts at most 10 minutes: run the parts in two calls
# (`bash tools/h200/final_check.sh bench`, then `... sanitize`). The benchmark's merged files are
# copied to $OUT and its per-run folders packed into one archive, since few files come back.
set -u -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
parts=${1:-bench sanitize}
sha256sum custom_op/_C.abi3.so | cut -c1-12
status=0
if [[ " $parts " == *" bench "* ]]; then
  python3 -m pytest tests/ops -m gpu -q -rs -p no:cacheprovider -n 8 > "$OUT/pytest-gpu.log" 2>&1 || status=1
  tail -1 "$OUT/pytest-gpu.log"
  python3 -m bench --device cuda --runs 3 --out /tmp/bench-3-runs > "$OUT/bench.log" 2>&1 || status=1
  cp /tmp/bench-3-runs/bench-cuda.{json,md,png} "$OUT/"
  tar czf "$OUT/bench-runs.tgz" -C /tmp/bench-3-runs run-1 run-2 run-3
fi
if [[ " $parts " == *" sanitize "* ]]; then
  compiled="test_benchmark_shapes and 65536 and (float32 or (float16 and not bfloat16))"
  SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_FILTER="$compiled" \
    SANITIZE_LOG_SUFFIX=-compiled-row-length bash tools/h200/sanitize.sh || status=1
  # initcheck over every kernel, as sanitize.sh runs it.
  compute-sanitizer --tool initcheck --error-exitcode 1 --print-limit 100000 \
    python3 -m pytest tests/ops/test_cuda.py -q -p no:cacheprovider -k "$compiled" \
    > "$OUT/sanitize-initcheck-compiled-row-length.log" 2>&1 || status=1
  echo "initcheck [every kernel, $compiled]: $(tail -1 "$OUT/sanitize-initcheck-compiled-row-length.log")"
  bash tools/h200/sanitize.sh || status=1
fi
exit $status
