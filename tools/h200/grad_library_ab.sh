#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying build/ab/{A,B}.so (two builds of the library) and
# build/ab/ops_old.py (custom_op/ops.py before a change): the reduction's backward kernels of both
# builds in alternating processes (library_ab.py --case backward); host time per call of the old
# and new ops.py, alternating; then, with build B and the new ops.py, every GPU test and
# compute-sanitizer memcheck and racecheck over the tests of the backward's row-spread path
# (AB_SANITIZE_FILTER: another pytest -k filter for them; AB_SANITIZE_TOOLS: other tools).
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
for v in A B A B; do
  cp "build/ab/$v.so" custom_op/_C.abi3.so
  python3 tools/h200/library_ab.py "$v" --case backward
done | tee "$out/library-ab-backward.txt"
cp custom_op/ops.py /tmp/ops_new.py
for v in old new old new; do
  if [ "$v" = old ]; then cp build/ab/ops_old.py custom_op/ops.py; else cp /tmp/ops_new.py custom_op/ops.py; fi
  echo "== ops.py $v"
  python3 tools/host_time.py --device cuda | grep -E "fwd\+bwd"
done | tee "$out/host-time-backward-path.txt"
cp /tmp/ops_new.py custom_op/ops.py
python3 -m pytest tests/ops -m gpu -q -rs -p no:cacheprovider -n 8 > "$out/pytest-gpu.log" 2>&1
echo "pytest exit $?: $(tail -1 "$out/pytest-gpu.log")"
SANITIZE_TOOLS="${AB_SANITIZE_TOOLS:-memcheck racecheck}" SANITIZE_FILTER="${AB_SANITIZE_FILTER:-many_rows}" SANITIZE_LOG_SUFFIX=-backward-rows \
  bash tools/h200/sanitize.sh
