"""weighted_square's own tests, beyond the shared suites (tests/ops): its gradient formulas, one
input requiring grad, the backward reading a sum's expanded gradient in place, and the benchmark's
sizes on a GPU."""

from __future__ import annotations

import pytest
import torch

import custom_op
from custom_op.testing import RTOL, random

OP = custom_op.weighted_square


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_gradients_are_the_formulas(device, dtype):
    x = random((5, 33), dtype, device).requires_grad_()
    w = random((5, 33), dtype, device).requires_grad_()
    grad = random((5, 33), dtype, device)
    gx, gw = torch.autograd.grad(OP(x, w), (x, w), grad)
    torch.testing.assert_close(gx, 2 * w.detach() * x.detach() * grad, rtol=RTOL[dtype], atol=0)
    torch.testing.assert_close(gw, x.detach().square() * grad, rtol=RTOL[dtype], atol=0)


def test_gradient_of_one_input_only(device):
    x = random((3, 8), torch.float32, device).requires_grad_()
    w = random((3, 8), torch.float32, device)
    OP(x, w).sum().backward()
    assert w.grad is None
    torch.testing.assert_close(x.grad, (2 * w * x).detach())


def test_a_sums_expanded_gradient_is_read_in_place(device):
    """.sum()'s gradient is one value expanded (stride 0): the kernels read it as such, with the
    same result as a dense gradient of ones."""
    x = random((4, 1000), torch.float32, device)
    w = random((4, 1000), torch.float32, device)
    backward = torch.ops.custom_op.weighted_square_backward.default
    expanded = torch.ones((), device=device).expand(4, 1000)
    for got, want in zip(backward(expanded, x, w), backward(torch.ones_like(x), x, w), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.gpu_memory
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(8192, 4096), (3, 2**22 + 1)], ids=str)
def test_benchmark_sizes_forward_and_backward(shape, dtype):
    x = random(shape, dtype, "cuda").requires_grad_()
    w = random(shape, dtype, "cuda").requires_grad_()
    grad = random(shape, dtype, "cuda")
    y = OP(x, w)
    gx, gw = torch.autograd.grad(y, (x, w), grad)
    xd, wd, gd = x.detach().double(), w.detach().double(), grad.double()
    for got, want in [(y, wd * xd * xd), (gx, 2 * wd * xd * gd), (gw, xd * xd * gd)]:
        torch.testing.assert_close(got.double(), want, rtol=RTOL[dtype], atol=0)
