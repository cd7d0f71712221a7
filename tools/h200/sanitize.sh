#!/usr/bin/env bash
# What `nox -s sanitize` runs, for a lent GPU machine without the Nox environment: the GPU tests
# (small shapes) under each compute-sanitizer tool, over a checkout carrying custom_op/_C.abi3.so.
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
read -r -a paths <<< "${SANITIZE_PATHS:-tests/ops}"
tests=("${paths[@]}" -m gpu -k "${SANITIZE_FILTER:-not large and not benchmark_shapes}" -x -q -p no:cacheprovider)
# SANITIZE_KERNELS: a --kernel-name filter, "" for every kernel (PyTorch's too).
kernels=${SANITIZE_KERNELS-kns=custom_op}
filter=()
[ -n "$kernels" ] && filter=(--kernel-name "$kernels")
status=0
for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check no)
  start=$SECONDS
  log="$out/sanitize-$tool${SANITIZE_LOG_SUFFIX:-}.log"
  compute-sanitizer --tool "$tool" --error-exitcode 1 --target-processes all "${filter[@]}" "${extra[@]}" \
    python3 -m pytest "${tests[@]}" > "$log" 2>&1
  rc=$?
  status=$((status | rc))
  echo "$tool [${kernels:-every kernel}]: exit $rc in $((SECONDS - start)) s; $(grep -E 'SUMMARY|passed|failed' "$log" | tail -2 | tr '\n' ' ')"
done
exit $status
