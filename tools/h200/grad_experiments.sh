#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying custom_op/_C.abi3.so: the experiments behind
# docs/performance.md's entries on the reduction's backward and on host time: work-split variants
# of the backward with a 1-D w outside PyTorch (grad_variants.cu), host time per call on the GPU
# machine (tools/host_time.py), and the elementwise op's benchmark (its small forward rows are
# host-bound). Logs go to $OUT.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
nvcc -O3 -arch=sm_90 -o /tmp/grad_variants tools/h200/grad_variants.cu &&
  /tmp/grad_variants | tee "$out/grad_variants.txt"
python3 tools/host_time.py --device cuda | tee "$out/host_time_cuda.txt"
python3 -m bench --device cuda --op weighted_square --out "$out/bench" > "$out/bench.log" 2>&1
echo "bench exit $?"
grep -E "^\| weighted_square forward" "$out/bench/"*.md | head -40
