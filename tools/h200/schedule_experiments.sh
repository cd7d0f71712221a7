#!/usr/bin/env bash
# On a lent GPU machine (no library needed): the scheduling experiments outside PyTorch that
# docs/performance.md's open work names: the backward with a 1-D w and the plain stream with
# blocks taking chunks from a counter (grad_variants.cu --dynamic), and the 4096x65536 forward
# compiled for its row length and software-pipelined (reduction_variants.cu --fixed-long-rows).
# Logs go to $OUT.
set -u -o pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv
nvcc -O3 -arch=sm_90 -o /tmp/grad_variants tools/h200/grad_variants.cu &&
  /tmp/grad_variants --dynamic | tee "$out/grad_variants_dynamic.txt"
nvcc -O3 -arch=sm_90 -o /tmp/reduction_variants tools/h200/reduction_variants.cu &&
  /tmp/reduction_variants --fixed-long-rows | tee "$out/reduction_variants_fixed_long_rows.txt"
