"""Property tests: random shapes (odd sizes), storage offsets that break 16-byte alignment,
strided views, every dtype; every operator of the registry against its float64 reference."""

from __future__ import annotations

import pytest
import torch
from conftest import SPECS
from hypothesis import given, settings
from hypothesis import strategies as st

from custom_op.testing import Sample

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@st.composite
def views(draw, shape, dtype, device):
    """A tensor of `shape` that is a view into a larger buffer: a storage offset (often not a
    multiple of 16 bytes), optionally a step in each dimension, optionally transposed."""
    steps = [draw(st.integers(1, 3)) for _ in shape]
    transpose = len(shape) >= 2 and draw(st.booleans())
    base_shape = [s * k for s, k in zip(shape, steps, strict=True)]
    if transpose:
        base_shape[-1], base_shape[-2] = base_shape[-2], base_shape[-1]
    offset = draw(st.integers(0, 7))
    numel = 1
    for s in base_shape:
        numel *= s
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    flat = torch.randn(numel + offset, generator=gen, dtype=torch.float64) + 0.1
    base = flat[offset:].view(base_shape) if base_shape else flat[offset : offset + 1].view(())
    if transpose:
        base = base.transpose(-1, -2)
    view = base[tuple(slice(None, None, k) for k in steps)] if shape else base
    return _keep_view(view, dtype, device)


def _keep_view(view, dtype, device):
    """Converts while keeping the view's strides and offset (a contiguous copy would hide them)."""
    storage = torch.empty(view.storage_offset() + _extent(view), dtype=dtype, device=device)
    out = storage.as_strided(view.shape, view.stride(), view.storage_offset())
    out.copy_(view)
    return out


def _extent(view):
    return 1 + sum((s - 1) * st_ for s, st_ in zip(view.shape, view.stride(), strict=True)) if view.numel() else 1


shapes = st.lists(st.integers(1, 37), min_size=1, max_size=3).map(tuple)


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES))
def test_every_op_matches_reference_on_any_view(device, spec, data, shape, dtype):
    # The op's own inputs for that shape, each replaced by a view of the same shape into a larger buffer.
    sample = spec.make_sample(shape, dtype, device)
    args = tuple(data.draw(views(a.shape, dtype, device)) if isinstance(a, torch.Tensor) else a for a in sample.args)
    viewed = Sample(args, f"views of {shape}", sample.kwargs)
    spec.check(spec.function(*viewed.args, **viewed.kwargs), viewed)


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@settings(max_examples=15, deadline=None)
@given(data=st.data(), shape=shapes)
def test_every_op_gradients_match_float64_autograd_on_any_view(device, spec, data, shape):
    sample = spec.make_sample(shape, torch.float64, device)
    args = tuple(
        data.draw(views(a.shape, torch.float64, device)).requires_grad_() if isinstance(a, torch.Tensor) else a
        for a in sample.args
    )
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    out = spec.function(*args, **sample.kwargs)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, inputs, grad)
    want = torch.autograd.grad(spec.reference(*args, **sample.kwargs), inputs, grad)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r)
