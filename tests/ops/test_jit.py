"""custom_op.jit.load(): compiles the sources, reloads after an edit without a restart, and
rebuilds nothing on an unchanged tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import custom_op
import custom_op.jit
from custom_op.testing import random

PACKAGE = Path(custom_op.__file__).parent
KERNEL = Path("ops") / "weighted_square" / "weighted_square_cpu.cpp"
ORIGINAL = "y[k] = static_cast<T>(static_cast<A>(w[k]) * xv * xv);"
EDITED = "y[k] = static_cast<T>(static_cast<A>(w[k]) * xv * xv + A(1));"

pytestmark = pytest.mark.slow


@pytest.fixture
def source_tree(tmp_path, monkeypatch):
    tree = tmp_path / "sources"  # a copy of the package's C++/CUDA: csrc/ and ops/
    for folder in ("csrc", "ops"):
        shutil.copytree(PACKAGE / folder, tree / folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    monkeypatch.setenv("CUSTOM_OP_JIT_DIR", str(tmp_path / "build"))
    return tree


def test_reload_after_edit_and_no_rebuild_when_unchanged(source_tree):
    assert ORIGINAL in (source_tree / KERNEL).read_text()
    x = random((4, 8), torch.float32, "cpu")
    w = random((8,), torch.float32, "cpu")

    first = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    torch.testing.assert_close(first.weighted_square(x, w), w * x * x)
    torch.testing.assert_close(first.weighted_sum_of_squares(x, w), (w * x * x).sum(-1))
    built = Path(first.library).stat().st_mtime_ns

    # Unchanged tree: the same ops, and ninja finds nothing to do even after forgetting them.
    assert custom_op.jit.load(with_cuda=False, source_dir=source_tree) is first
    custom_op.jit._loaded.clear()
    again = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    assert again.namespace == first.namespace
    assert Path(again.library).stat().st_mtime_ns == built

    # Edit a kernel: the next load() in this process returns ops from the new build.
    kernel = source_tree / KERNEL
    kernel.write_text(kernel.read_text().replace(ORIGINAL, EDITED))
    edited = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    assert edited.namespace != first.namespace
    torch.testing.assert_close(edited.weighted_square(x, w), w * x * x + 1)
    # The earlier build stays usable beside it, and both are differentiable.
    torch.testing.assert_close(first.weighted_square(x, w), w * x * x)
    xg = x.clone().requires_grad_()
    edited.weighted_square(xg, w).sum().backward()
    torch.testing.assert_close(xg.grad, 2 * w * x)


def test_jit_ops_work_under_compile(source_tree):
    ops = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    compiled = torch.compile(ops.weighted_sum_of_squares, fullgraph=True, backend="aot_eager")
    x = random((3, 16), torch.float32, "cpu")
    w = random((16,), torch.float32, "cpu")
    torch.testing.assert_close(compiled(x, w), (w * x * x).sum(-1))
