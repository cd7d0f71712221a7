"""The floor plan every operator folder (custom_op/ops/<op>/) follows: the same files with the same
roles, so that a reader of one operator knows where everything is in every other.
docs/adding-an-operator.md shows it; tests/envs/test_floor_plan.py holds every folder to it."""

from __future__ import annotations

import re
from pathlib import Path

# File name (OP stands for the operator's name) -> its role.
FILES = {
    "OP_schema.cpp": "the schemas: the op, its backward op (TORCH_LIBRARY fragment)",
    "OP_checks.h": "the input checks, once for both backends, on common/checks.h",
    "OP_math.h": "the math, once for both backends, in the accumulate type",
    "OP_cpu.cpp": "the CPU forward kernel and its registration",
    "OP_backward_cpu.cpp": "the CPU backward kernel and its registration",
    "OP_cuda.cu": "the CUDA forward kernel and its registration",
    "OP_backward_cuda.cu": "the CUDA backward kernel and its registration",
    "__init__.py": "the Python API: argument checks on custom_op.checks, fake kernels, autograd on the op, autocast",
    "sharding.py": "the DTensor sharding rules (register_sharding)",
    "testing.py": "SPEC: what the shared suites and the benchmark need to know",
}
# Optional helpers of that operator alone: OP_<what>.h or .cuh (rms_norm_rows.cuh).
HELPER = r"OP_[a-z0-9_]+\.(h|cuh)"


def problems(folder: Path, op: str | None = None) -> list[str]:
    """What in `folder` departs from the plan: a missing file, or one the plan has no place for."""
    op = op or folder.name
    expected = {name.replace("OP", op) for name in FILES}
    helper = re.compile(HELPER.replace("OP", re.escape(op)))
    present = {p.name for p in folder.iterdir() if p.name != "__pycache__"}
    found = [
        f"{folder.name}: missing {name} ({FILES[name.replace(op, 'OP', 1)]})" for name in sorted(expected - present)
    ]
    extra = sorted(name for name in present - expected if not helper.fullmatch(name))
    found += [f"{folder.name}: {name} has no place in the plan (docs/adding-an-operator.md)" for name in extra]
    return found
