"""weighted_square.out and weighted_square_: results written into given memory, in every dtype,
weight form and backend; contiguous or not; opcheck, torch.compile and clear errors."""

from __future__ import annotations

import pytest
import torch

import custom_op
from custom_op.ops.weighted_square.testing import FORMS, SPEC, weight_shape
from custom_op.testing import Sample, random


def assert_matches_reference(out, x, w):
    """out against the float64 reference of weighted_square(x, w): dtype, device, shape, values."""
    SPEC.check(out, Sample((x, w)))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape", [(7,), (5, 33), (2, 3, 64)], ids=str)
def test_out_and_in_place_match_reference(form, shape, dtype, device):
    x = random(shape, dtype, device)
    w = random(weight_shape(shape, form), dtype, device)
    out = torch.full_like(x, float("nan"))
    assert custom_op.weighted_square(x, w, out=out) is out
    assert_matches_reference(out, x, w)
    y = x.clone()
    pointer = y.data_ptr()
    assert custom_op.weighted_square_(y, w) is y
    assert y.data_ptr() == pointer
    assert_matches_reference(y, x, w)


def test_non_contiguous_out_and_in_place(dtype, device):
    x = random((12, 10), dtype, device)
    w = random((10,), dtype, device)
    out = torch.full((10, 12), float("nan"), dtype=dtype, device=device).t()
    custom_op.weighted_square(x, w, out=out)
    assert_matches_reference(out, x, w)
    y = random((10, 12), dtype, device).t()  # in place on a transposed view
    before = y.clone()
    custom_op.weighted_square_(y, w)
    assert_matches_reference(y, before, w)


def test_out_aliasing_w_in_full_form(device):
    x = random((64,), torch.float32, device)
    w = random((64,), torch.float32, device)
    expected = w * x * x
    custom_op.weighted_square(x, w, out=w)  # out is w itself: every element read before written
    torch.testing.assert_close(w, expected)


def test_out_partially_overlapping_an_input(device):
    buffer = random((65,), torch.float32, device)
    x = buffer[:64]
    w = random((64,), torch.float32, device)
    expected = w * x * x
    custom_op.weighted_square(x, w, out=buffer[1:])  # shifted by one element: computed aside, then copied
    torch.testing.assert_close(buffer[1:], expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_in_place_allocates_nothing_on_the_gpu():
    x = random((1 << 20,), torch.float32, "cuda")
    w = random((1 << 20,), torch.float32, "cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    custom_op.weighted_square_(x, w)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() == before
    y = custom_op.weighted_square(x, w)
    assert torch.cuda.max_memory_allocated() >= before + y.numel() * 4


def test_opcheck(device):
    x = random((6, 10), torch.float32, device)
    w = random((10,), torch.float32, device)
    for out in (torch.empty(6, 10, device=device), torch.empty(10, 6, device=device).t()):
        torch.library.opcheck(torch.ops.custom_op.weighted_square.out, (x, w), {"out": out})
    for y in (x.clone(), x.clone().t().contiguous().t()):
        torch.library.opcheck(torch.ops.custom_op.weighted_square_.default, (y, w))


def test_compile_fullgraph(device):
    torch._dynamo.reset()

    def f(x, w, out):
        custom_op.weighted_square_(x, w)
        return custom_op.weighted_square(x, w, out=out)

    compiled = torch.compile(f, fullgraph=True)
    x = random((8, 16), torch.float32, device)
    w = random((16,), torch.float32, device)
    a, b = x.clone(), x.clone()
    out_a, out_b = torch.empty_like(x), torch.empty_like(x)
    compiled(a, w, out_a)
    f(b, w, out_b)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(out_a, out_b)


@pytest.mark.isolated
def test_bad_out_and_gradients(device):
    x = random((3, 4), torch.float32, device)
    w = random((4,), torch.float32, device)
    with pytest.raises(ValueError, match=r"argument 'out' must have the shape \[3, 4\], got \[12\]"):
        custom_op.weighted_square(x, w, out=torch.empty(12, device=device))
    with pytest.raises(ValueError, match=r"argument 'out' must have x's dtype float32, got float64"):
        custom_op.weighted_square(x, w, out=torch.empty(3, 4, dtype=torch.float64, device=device))
    with pytest.raises(ValueError, match=r"argument 'out' must be on x's device"):
        custom_op.weighted_square(x, w, out=torch.empty(3, 4, device="meta"))
    leaf = x.clone().requires_grad_()
    with pytest.raises(RuntimeError, match=r"weighted_square_ writes into existing memory and is not differentiable"):
        custom_op.weighted_square_(leaf, w)
    with pytest.raises(RuntimeError, match=r"weighted_square\(out=...\) .* not differentiable"):
        custom_op.weighted_square(leaf, w, out=torch.empty(3, 4, device=device))
    with torch.no_grad():
        custom_op.weighted_square_(leaf, w)  # allowed where no graph is recorded
