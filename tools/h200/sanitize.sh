#!/usr/bin/env bash
# What `nox -s sanitize` runs, for a lent GPU machine without the Nox environment: the GPU tests
# (small shapes) under each compute-sanitizer tool, over a checkout carrying custom_op/_C.abi3.so.
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
read -r -a paths <<< "${SANITIZE_PATHS:-tests/ops}"
tests=("${paths[@]}" -m gpu -k "${SANITIZE_FILTER:-not large and not benchmark_shapes and not nccl}" -x -q -p no:cacheprovider)
# SANITIZE_KERNELS: a --kernel-name filter, "" for every kernel (PyTorch's too). initcheck always
# instruments every kernel: memory written by a skipped kernel would look uninitialized.
status=0
for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
  kernels=${SANITIZE_KERNELS-kns=custom_op}
  [ "$tool" = initcheck ] && kernels=
  filter=()
  [ -n "$kernels" ] && filter=(--kernel-name "$kernels")
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
