#!/usr/bin/env bash
# On a lent GPU machine over a checkout carrying custom_op/_C.abi3.so (built on the CPU-only
# machine): kernel launch-shape experiments, then every GPU test (cuda:1 too when there are two).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())"
nvcc -O3 -arch=sm_90 -o /tmp/kernel_variants tools/h200/kernel_variants.cu && /tmp/kernel_variants | tee "$out/kernel_variants.txt"
python3 -m pytest tests/ops -m gpu -q -rs -p no:cacheprovider 2>&1 | tee "$out/pytest-gpu.log" | tail -8
