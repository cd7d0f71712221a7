#!/usr/bin/env bash
# Runs on the lent H200 (torch 2.11 there) over a checkout that carries custom_op/_C.abi3.so,
# built on the CPU-only machine against torch 2.14.1: the whole test suite, GPU tests included,
# the SASS check for 16-byte accesses, and the benchmark. Logs go to $OUT.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
python3 -c "import custom_op; print('library', custom_op.LIBRARY_PATH)"
echo "== SASS: 128-bit global loads/stores per kernel"
cuobjdump --dump-sass --gpu-architecture sm_90 custom_op/_C.abi3.so > "$out/sass_sm90.txt" 2>&1
grep -cE "LDG\.E\.([A-Z0-9]+\.)*128" "$out/sass_sm90.txt" | sed 's/^/LDG.128 count: /'
grep -cE "STG.E.128" "$out/sass_sm90.txt" | sed 's/^/STG.128 count: /'
echo "== pytest"
python3 -m pytest tests -q -rs -p no:cacheprovider ${PYTEST_ARGS:-} 2>&1 | tee "$out/pytest.log" | tail -25
echo "pytest exit: ${PIPESTATUS[0]}"
echo "== benchmark"
python3 -m bench --out "$out" 2>&1 | grep -E "^\[|wrote"
