"""rms_norm's forward: against torch.nn.functional.rms_norm (what it replaces) in every dtype, the
per-row rstd that rms_norm_forward returns for the backward, and eps."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import custom_op
from custom_op.testing import random

OP = custom_op.rms_norm
# The output's error relative to its magnitude: its rounding plus a row's sum of squares in float32.
RTOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
SHAPES = [(7,), (3, 5), (4, 64), (2, 3, 129), (5, 4096)]


def forward_op():
    return torch.ops.custom_op.rms_norm_forward.default


def expected_rstd(x, eps):
    xd = x.double()
    return torch.rsqrt(xd.pow(2).mean(-1) + eps)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_torch_functional(shape, dtype, device):
    """Within the dtype's rounding of torch.nn.functional.rms_norm run in float64, and within two
    roundings of the same in the input's dtype (the call a model makes instead)."""
    x, w = random(shape, dtype, device), random(shape[-1:], dtype, device)
    got = OP(x, w, 1e-6)
    assert (got.dtype, got.shape, got.device) == (dtype, x.shape, x.device)
    exact = F.rms_norm(x.double(), shape[-1:], w.double(), 1e-6)
    torch.testing.assert_close(got.double(), exact, rtol=RTOL[dtype], atol=0)
    same_dtype = F.rms_norm(x, shape[-1:], w, 1e-6)
    torch.testing.assert_close(got, same_dtype, rtol=2 * RTOL[dtype], atol=0)


@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 129)], ids=str)
def test_gradients_match_torch_functional_in_float64(shape, device):
    x = random(shape, torch.float64, device).requires_grad_()
    w = random(shape[-1:], torch.float64, device).requires_grad_()
    grad = random(shape, torch.float64, device)
    got = torch.autograd.grad(OP(x, w, 1e-6), (x, w), grad)
    want = torch.autograd.grad(F.rms_norm(x, shape[-1:], w, 1e-6), (x, w), grad)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4096)], ids=str)
def test_forward_op_returns_y_and_the_rows_rstd(shape, dtype, device):
    """rms_norm_forward's (y, rstd): y is the public function's result, bit for bit; rstd is
    1 / sqrt(mean(x^2) + eps) per row, in the accumulate dtype, as the backward reads it."""
    x, w = random(shape, dtype, device), random(shape[-1:], dtype, device)
    y, rstd = forward_op()(x, w, 1e-6)
    assert torch.equal(y, OP(x, w, 1e-6))
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    assert (rstd.dtype, rstd.shape, rstd.device) == (acc, x.shape[:-1], x.device)
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(rstd.double(), expected_rstd(x, 1e-6), rtol=tolerance, atol=0)


def test_eps_defaults_to_1e_6(device):
    x, w = random((4, 33), torch.float32, device), random((33,), torch.float32, device)
    assert torch.equal(OP(x, w), OP(x, w, 1e-6))
    assert not torch.equal(OP(x, w), OP(x, w, 1e-2))


@pytest.mark.parametrize("eps", [0.0, 1e-6, 0.5, 1000.0, 1], ids=str)
def test_eps_is_added_to_the_mean_of_squares(eps, dtype, device):
    """eps of any size (an int too) enters as mean(x^2) + eps, in the output and in rstd."""
    x, w = random((6, 40), dtype, device), random((40,), dtype, device)
    y, rstd = forward_op()(x, w, eps)
    exact = F.rms_norm(x.double(), (40,), w.double(), float(eps))
    torch.testing.assert_close(y.double(), exact, rtol=RTOL[dtype], atol=0)
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(rstd.double(), expected_rstd(x, eps), rtol=tolerance, atol=0)


def test_a_zero_row_gives_zeros_and_finite_gradients(device):
    """With eps > 0 a row of zeros is normalized to zeros (rstd = 1 / sqrt(eps)), and its gradient
    is rstd * grad * weight, where the row's sums vanish."""
    eps = 1e-4
    x = random((3, 16), torch.float64, device)
    x[1] = 0
    x.requires_grad_()
    w = random((16,), torch.float64, device).requires_grad_()
    y, rstd = forward_op()(x, w, eps)
    assert torch.equal(y[1], torch.zeros_like(y[1]))
    torch.testing.assert_close(rstd[1].item(), eps**-0.5, rtol=1e-12, atol=0)
    grad = random((3, 16), torch.float64, device)
    gx, gw = torch.autograd.grad(y, (x, w), grad)
    torch.testing.assert_close(gx[1], eps**-0.5 * grad[1] * w.detach(), rtol=1e-12, atol=0)
    want = torch.autograd.grad(F.rms_norm(x, (16,), w, eps), (x, w), grad)
    torch.testing.assert_close(gx, want[0], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gw, want[1], rtol=1e-10, atol=1e-12)
