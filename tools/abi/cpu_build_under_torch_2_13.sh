#!/usr/bin/env bash
# Stable-ABI check on a CPU-only machine: build the CPU-only abi3 wheel against one torch
# (BUILD_TORCH, default 2.14.1), install it beside another (RUN_TORCH, default 2.13.0, CPU
# build) in a fresh venv, and run the whole test suite there against the installed wheel.
set -euo pipefail
build_torch=${BUILD_TORCH:-2.14.1}
run_torch=${RUN_TORCH:-2.13.0}
work=${WORK:-$(mktemp -d)}
repo=$(cd "$(dirname "$0")/../.." && pwd)

python3 -m venv "$work/build-venv"
"$work/build-venv/bin/pip" install -q "torch==$build_torch" setuptools wheel ninja
CUSTOM_OP_CUDA=0 "$work/build-venv/bin/pip" wheel -q --no-build-isolation --no-deps "$repo" -w "$work/dist"
wheel=$(ls "$work"/dist/custom_op-*-cp310-abi3-*.whl)
echo "built $(basename "$wheel") against torch $build_torch"

python3 -m venv "$work/run-venv"
"$work/run-venv/bin/pip" install -q "torch==$run_torch" pytest hypothesis numpy
"$work/run-venv/bin/pip" install -q --no-deps "$wheel"
(cd "$work" && "$work/run-venv/bin/python" -c "import torch, custom_op; print('torch', torch.__version__, 'library', custom_op.LIBRARY_PATH)")
cd "$repo"  # the tests import the installed wheel: `pytest` (not python -m) keeps the checkout off sys.path
"$work/run-venv/bin/pytest" -q -p no:cacheprovider tests
