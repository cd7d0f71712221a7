#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying custom_op/_C.abi3.so: the experiments behind
# docs/performance.md's reduction entries: work-split variants outside PyTorch
# (reduction_variants.cu), the op and Inductor's kernels for the cases that miss their targets,
# after idle and after busy time (reduction_probe.py, with Inductor's generated code), and the
# CUDA gradient tests. Logs go to $OUT.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
nvcc -O3 -arch=sm_90 -o /tmp/reduction_variants tools/h200/reduction_variants.cu &&
  /tmp/reduction_variants | tee "$out/reduction_variants.txt"
TORCH_LOGS=output_code python3 tools/h200/reduction_probe.py > "$out/reduction_probe_output_code.txt" 2>&1
echo "probe exit $?"
grep -E "round|copy" "$out/reduction_probe_output_code.txt" | tee "$out/reduction_probe.txt"
python3 -m pytest tests/ops/test_cuda.py -q -p no:cacheprovider -k "backward" 2>&1 | tail -3 | tee "$out/pytest_backward.log"
