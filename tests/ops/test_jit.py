"""custom_op.jit.load(): compiles the sources, reloads after an edit without a restart, and
rebuilds nothing on an unchanged tree. The edit goes to a probe op that the test adds to a copy of
the sources, so the test works with whatever operators the registry holds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from conftest import prefixed

import custom_op
import custom_op.jit
from custom_op import ops
from custom_op.testing import random, total

PACKAGE = Path(custom_op.__file__).parent
SPECS = ops.specs()
# A probe op, jit_probe(x) = x + kAdd for a float32 x on the CPU, in its own folder of the copy.
PROBE = Path("ops") / "jit_probe" / "jit_probe_cpu.cpp"
PROBE_SOURCE = """\
#include <torch/csrc/stable/ops.h>

#include "common/checks.h"
#include "common/library.h"
#include "common/tensor_utils.h"

namespace {

constexpr float kAdd = 1.0f;

custom_op::Tensor jit_probe(const custom_op::Tensor& x_in) {
  const custom_op::Tensor x = custom_op::dense(x_in);
  custom_op::Tensor y =
      custom_op::empty_like_with_shape(x, custom_op::shape_of(x));
  const float* xp = custom_op::cdata<float>(x);
  float* yp = custom_op::mdata<float>(y);
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] + kAdd;
  return y;
}

}  // namespace

CUSTOM_OP_FRAGMENT(m) { m.def("jit_probe(Tensor x) -> Tensor"); }

CUSTOM_OP_IMPL(CPU, m) { m.impl("jit_probe", TORCH_BOX(&jit_probe)); }
"""
ORIGINAL = "constexpr float kAdd = 1.0f;"
EDITED = "constexpr float kAdd = 2.0f;"

# One worker of pytest-xdist: the second test reuses the first one's build (custom_op.jit keeps it per process).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("jit")]


@pytest.fixture
def source_tree(tmp_path, monkeypatch):
    tree = tmp_path / "sources"  # a copy of the package's C++/CUDA: csrc/ and ops/, plus the probe
    for folder in ("csrc", "ops"):
        shutil.copytree(PACKAGE / folder, tree / folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (tree / PROBE).parent.mkdir()
    (tree / PROBE).write_text(PROBE_SOURCE)
    monkeypatch.setenv("CUSTOM_OP_JIT_DIR", str(tmp_path / "build"))
    # The loop is under test, not the optimizer: -O0 builds the library in half the time of -O3 (the
    # installed build compiles the same sources with -O3, and the suites test it).
    monkeypatch.setenv("CUSTOM_OP_DEBUG", "1")
    return tree


def probe(api, x):
    return getattr(torch.ops, api.namespace).jit_probe(x)


def check_same_as_installed(api, requires_grad=False):
    """Each registered op of the JIT build `api` computes what the installed library does, and,
    requiring grad, gives the same gradients (its autograd is registered)."""
    for spec in SPECS:
        sample = spec.sample_of_shape((4, 8), torch.float32, "cpu")
        sample = spec.leaves(sample) if requires_grad else sample
        ours = getattr(api, spec.name)(*sample.args, **sample.kwargs)
        torch.testing.assert_close(ours, spec.function(*sample.args, **sample.kwargs), msg=prefixed(spec.name))
        if requires_grad:
            leaves = spec.grad_inputs(sample)
            got = torch.autograd.grad(total(ours), leaves)
            expected = torch.autograd.grad(total(spec.function(*sample.args, **sample.kwargs)), leaves)
            for a, b in zip(got, expected, strict=True):
                torch.testing.assert_close(a, b, msg=prefixed(spec.name))


def test_reload_after_edit_and_no_rebuild_when_unchanged(source_tree):
    x = random((4, 8), torch.float32, "cpu")

    first = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    torch.testing.assert_close(probe(first, x), x + 1)
    check_same_as_installed(first)
    built = Path(first.library).stat().st_mtime_ns

    # Unchanged tree: the same ops, and ninja finds nothing to do even after forgetting them.
    assert custom_op.jit.load(with_cuda=False, source_dir=source_tree) is first
    custom_op.jit._loaded.clear()
    again = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    assert again.namespace == first.namespace
    assert Path(again.library).stat().st_mtime_ns == built

    # Edit a kernel: the next load() in this process returns ops from the new build.
    kernel = source_tree / PROBE
    assert ORIGINAL in kernel.read_text()
    kernel.write_text(kernel.read_text().replace(ORIGINAL, EDITED))
    edited = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    assert edited.namespace != first.namespace
    torch.testing.assert_close(probe(edited, x), x + 2)
    # The earlier build stays usable beside it, and both builds' ops are differentiable.
    torch.testing.assert_close(probe(first, x), x + 1)
    check_same_as_installed(first, requires_grad=True)
    check_same_as_installed(edited, requires_grad=True)


def test_jit_ops_work_under_compile(source_tree):
    if not SPECS:
        pytest.skip("no operator in the registry")
    api = custom_op.jit.load(with_cuda=False, source_dir=source_tree)
    for spec in SPECS:
        torch._dynamo.reset()
        compiled = torch.compile(getattr(api, spec.name), fullgraph=True, backend="aot_eager")
        sample = spec.sample_of_shape((3, 16), torch.float32, "cpu")
        torch.testing.assert_close(
            compiled(*sample.args, **sample.kwargs),
            spec.function(*sample.args, **sample.kwargs),
            msg=prefixed(spec.name),
        )
