#!/usr/bin/env bash
# On a lent GPU machine (no library needed): the scheduling experiments outside PyTorch that
# docs/performance.md's open work names. x streamed through shared memory by Hopper's bulk
# asynchronous copy, for the backward with a 1-D w and for the forward's long and short rows
# (grad_variants.cu --bulk, reduction_variants.cu --bulk); the backward and the plain stream with
# blocks taking chunks from a counter (grad_variants.cu --dynamic); the 4096x65536 forward
# compiled for its row length and software-pipelined (reduction_variants.cu --fixed-long-rows).
# Logs go to $OUT.
set -u -o pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv
nvcc -O3 -arch=sm_90 -o /tmp/grad_variants tools/h200/grad_variants.cu || exit 1
nvcc -O3 -arch=sm_90 -o /tmp/reduction_variants tools/h200/reduction_variants.cu || exit 1
/tmp/grad_variants --bulk | tee "$out/grad_variants_bulk.txt"
/tmp/reduction_variants --bulk | tee "$out/reduction_variants_bulk.txt"
/tmp/grad_variants --dynamic | tee "$out/grad_variants_dynamic.txt"
/tmp/reduction_variants --fixed-long-rows | tee "$out/reduction_variants_fixed_long_rows.txt"
