#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying custom_op/_C.abi3.so: the experiments behind
# docs/performance.md's "op-level gap": standalone kernel variants timed synchronized and
# back-to-back, the ops timed both ways in one process, each kernel's DRAM bytes and occupancy
# under ncu, and the Triton code Inductor generates for the same cases. Logs go to $OUT.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvcc -O3 -arch=sm_90 -o /tmp/kernel_variants tools/h200/kernel_variants.cu && /tmp/kernel_variants | tee "$out/kernel_variants.txt"
python3 tools/h200/op_gap_probe.py | tee "$out/op_gap_probe.txt"
TORCH_LOGS=output_code python3 tools/h200/op_gap_probe.py --ncu > "$out/inductor_output_code.txt" 2>&1
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size
metrics=$metrics,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
ncu --clock-control none --cache-control none -k 'regex:weighted|rows_by|triton' --launch-count 60 \
  --metrics "$metrics" --csv python3 tools/h200/op_gap_probe.py --ncu > "$out/ncu_op_gap.csv" 2> "$out/ncu_op_gap.err"
echo "ncu exit $?; $(wc -l < "$out/ncu_op_gap.csv") lines"
