"""Property tests: random shapes (odd sizes), storage offsets that break 16-byte alignment,
strided views, every dtype; every operator of the registry against its float64 reference."""

from __future__ import annotations

import pytest
import torch
from conftest import SPECS
from hypothesis import given, settings
from hypothesis import strategies as st

from custom_op.testing import Sample, outputs

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


@st.composite
def strided_copy(draw, t, device):
    """An integer or boolean tensor's values (labels, indices, masks) unchanged, in a view with a
    storage offset and a step between its elements."""
    offset, step = draw(st.integers(0, 7)), draw(st.integers(1, 3))
    base = torch.zeros(offset + t.numel() * step + 1, dtype=t.dtype)
    view = base.as_strided(t.shape, [s * step for s in t.contiguous().stride()], offset)
    view.copy_(t)
    return _keep_view(view, t.dtype, device)


def _viewed(data, sample, dtype, device):
    """Each floating tensor replaced by a random view of its shape; integer and boolean ones keep
    their values (in a strided view of their own dtype)."""
    floating = set(sample.floating)

    def view_of(i, a):
        if not isinstance(a, torch.Tensor):
            return a
        if i in floating:
            return data.draw(views(a.shape, dtype, device))
        return data.draw(strided_copy(a.cpu(), device))

    return Sample(tuple(view_of(i, a) for i, a in enumerate(sample.args)), "views", sample.kwargs)


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
    viewed = _viewed(data, spec.sample_of_shape(shape, dtype, device), dtype, device)
    spec.check(spec.function(*viewed.args, **viewed.kwargs), viewed)


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@settings(max_examples=15, deadline=None)
@given(data=st.data(), shape=shapes)
def test_every_op_gradients_match_float64_autograd_on_any_view(device, spec, data, shape):
    sample = _viewed(data, spec.sample_of_shape(shape, torch.float64, device), torch.float64, device)
    sample = spec.leaves(sample)
    args, inputs = sample.args, spec.grad_inputs(sample)
    out = outputs(spec.function(*args, **sample.kwargs))
    grads = [torch.randn_like(o) for o in out]
    got = torch.autograd.grad(out, inputs, grads)
    want = torch.autograd.grad(outputs(spec.reference(*args, **sample.kwargs)), inputs, grads)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r)
