#!/usr/bin/env bash
# What `nox -s sanitize` runs, for a lent GPU machine without the Nox environment: the GPU tests
# (small shapes) under each compute-sanitizer tool, over a checkout carrying custom_op/_C.abi3.so.
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
read -r -a paths <<< "${SANITIZE_PATHS:-tests/ops}"
tests=("${paths[@]}" -m gpu -k "${SANITIZE_FILTER:-not large and not benchmark_shapes}" -x -q -p no:cacheprovider)
status=0
for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check no)
  start=$SECONDS
  # Only this library's kernels: the tests' references run PyTorch's own kernels too.
  compute-sanitizer --tool "$tool" --error-exitcode 1 --target-processes all --kernel-name kns=custom_op "${extra[@]}" \
    python3 -m pytest "${tests[@]}" > "$out/sanitize-$tool.log" 2>&1
  rc=$?
  status=$((status | rc))
  echo "$tool: exit $rc in $((SECONDS - start)) s; $(grep -E 'ERROR SUMMARY|passed|failed' "$out/sanitize-$tool.log" | tail -2 | tr '\n' ' ')"
done
exit $status
