"""Shared fixtures: devices, dtypes, every registered operator (`spec`), the example ops' references."""

from __future__ import annotations

import inspect
import shutil
import sys

import pytest
import torch
from isolation import WORKER

import custom_op
from custom_op import ops
from custom_op.testing import RTOL, random  # noqa: F401  (the test files import them from here)

if custom_op.LIBRARY_PATH is None:
    raise pytest.UsageError(str(custom_op._LOAD_ERROR))

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def pytest_collection_modifyitems(config, items):
    # Tests parametrized on the CUDA device are GPU tests too: `pytest -m gpu` selects them.
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("device") == "cuda":
            item.add_marker(pytest.mark.gpu)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    # Tests marked `isolated` (every bad-input case) run in a worker process: a crash fails that
    # test alone and names the signal, instead of ending the whole run.
    if pyfuncitem.get_closest_marker("isolated") is None:
        return None
    names = inspect.signature(pyfuncitem.obj).parameters
    WORKER.run(pyfuncitem.obj, {name: pyfuncitem.funcargs[name] for name in names})
    return True


def pytest_sessionfinish(session):
    WORKER.close()


@pytest.fixture
def static_libstdcxx_compiler(tmp_path):
    """A C++ compiler that links libstdc++ statically, as relocated or module GCCs can: g++ plus
    -static-libstdc++, the way a CXX wrapper or inherited flags add it."""
    gxx = shutil.which("g++")
    if gxx is None or not sys.platform.startswith("linux"):
        pytest.skip("needs g++ on Linux")
    wrapper = tmp_path / "static-libstdcxx-g++"
    wrapper.write_text(f'#!/bin/sh\nexec {gxx} "$@" -static-libstdc++\n')
    wrapper.chmod(0o755)
    return str(wrapper)


SPECS = ops.specs()


@pytest.fixture(params=SPECS, ids=lambda spec: spec.name)
def spec(request):
    """Each operator of the registry (custom_op/ops/<name>/testing.py): the shared suites run on all."""
    return request.param


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(params=DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def dtype(request):
    return request.param


@pytest.fixture
def deterministic_algorithms():
    """torch.use_deterministic_algorithms(True) for one test."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)


def weight_shape(x_shape, form):
    return tuple(x_shape) if form == "full" else (x_shape[-1],)


def reference(op: str, x: torch.Tensor, w: torch.Tensor):
    """float64 reference and the magnitude its error is relative to."""
    xd, wd = x.double().cpu(), w.double().cpu()
    terms = wd * xd * xd
    if op == "weighted_square":
        return terms, terms.abs()
    return terms.sum(-1), terms.abs().sum(-1)


def assert_matches_reference(op: str, out: torch.Tensor, x: torch.Tensor, w: torch.Tensor):
    ref, scale = reference(op, x, w)
    assert out.dtype == x.dtype
    assert out.device == x.device
    assert out.shape == ref.shape
    err = (out.double().cpu() - ref).abs()
    # plus the spacing of subnormals: a result that underflows is rounded on an absolute grid
    finfo = torch.finfo(x.dtype)
    bound = RTOL[x.dtype] * scale + finfo.tiny * finfo.eps
    worst = (err / bound).max().item() if err.numel() else 0.0
    assert torch.isfinite(out).all(), "non-finite output"
    assert worst <= 1.0, f"error {worst:.3g}x the tolerance for {x.dtype}"
