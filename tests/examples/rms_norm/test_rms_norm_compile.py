"""rms_norm under torch.compile through torch.ops (a model's norm layer, dynamic shapes, the
forward op's rstd), and its backward op under opcheck."""

from __future__ import annotations

import pytest
import torch

from custom_op.testing import random


def block(x, w):
    """A residual block's norm as a model writes it, through the registered op."""
    h = torch.ops.custom_op.rms_norm(x, w, 1e-6)
    return x + torch.tanh(h) * 0.5


def loss_and_gradients(fn, x, w):
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    loss = fn(x, w).square().sum()
    return (loss, *torch.autograd.grad(loss, (x, w)))


def test_compile_fullgraph_through_torch_ops(device):
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True)
    x, w = random((6, 48), torch.float32, device), random((48,), torch.float32, device)
    for got, want in zip(loss_and_gradients(compiled, x, w), loss_and_gradients(block, x, w), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_compile_dynamic_shapes_through_torch_ops(device):
    """One graph over rows and features of several sizes: the fake kernels' shapes are symbolic."""
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, dynamic=True, backend="aot_eager")
    for rows, cols in ((3, 16), (7, 16), (5, 40), (2, 3)):
        x, w = random((rows, cols), torch.float32, device), random((cols,), torch.float32, device)
        for got, want in zip(loss_and_gradients(compiled, x, w), loss_and_gradients(block, x, w), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_compile_forward_op_returns_rstd(device):
    torch._dynamo.reset()

    def forward(x, w):
        return torch.ops.custom_op.rms_norm_forward(x, w, 1e-6)

    x, w = random((5, 40), torch.bfloat16, device), random((40,), torch.bfloat16, device)
    (y, rstd), (y_eager, rstd_eager) = torch.compile(forward, fullgraph=True)(x, w), forward(x, w)
    assert (y.dtype, rstd.dtype, rstd.shape) == (torch.bfloat16, torch.float32, (5,))
    assert torch.equal(y, y_eager) and torch.equal(rstd, rstd_eager)


@pytest.mark.parametrize("shape", [(5,), (3, 8), (2, 3, 8)], ids=str)
def test_opcheck_backward_op(shape, device):
    x, w = random(shape, torch.float64, device), random(shape[-1:], torch.float64, device)
    _, rstd = torch.ops.custom_op.rms_norm_forward(x, w, 1e-6)
    grad = random(shape, torch.float64, device)
    torch.library.opcheck(torch.ops.custom_op.rms_norm_backward.default, (grad, x, w, rstd))
