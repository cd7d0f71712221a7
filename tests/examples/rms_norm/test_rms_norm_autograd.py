"""rms_norm's gradients: one input requiring grad, rstd saved by the forward and read by the one
backward op (not recomputed, not differentiable), and the same bits on every run and whatever the
number of CPU threads."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import custom_op
from custom_op.testing import random

OP = custom_op.rms_norm


def float64_gradients(x, w, grad, eps=1e-6):
    """Gradients of torch.nn.functional.rms_norm at x and w in float64."""
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    return torch.autograd.grad(F.rms_norm(xd, xd.shape[-1:], wd, eps), (xd, wd), grad.double())


def test_gradient_of_x_only(device):
    x = random((3, 8), torch.float32, device).requires_grad_()
    w = random((8,), torch.float32, device)
    grad = random((3, 8), torch.float32, device)
    OP(x, w).backward(grad)
    assert w.grad is None
    torch.testing.assert_close(x.grad.double(), float64_gradients(x, w, grad)[0], rtol=1e-5, atol=1e-6)


def test_gradient_of_weight_only(device):
    x = random((3, 8), torch.float32, device)
    w = random((8,), torch.float32, device).requires_grad_()
    grad = random((3, 8), torch.float32, device)
    y = OP(x, w)
    assert y.grad_fn is not None
    (gw,) = torch.autograd.grad(y, (w,), grad)
    torch.testing.assert_close(gw.double(), float64_gradients(x, w, grad)[1], rtol=1e-5, atol=1e-6)


class OpCalls(TorchDispatchMode):
    """Records each call of rms_norm's forward and backward ops with its arguments and results."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.namespace == "custom_op" and func.__name__.startswith("rms_norm"):
            self.calls.append((func.__name__.split(".")[0], args, out))
        return out


def test_the_backward_reads_the_rstd_the_forward_saved(device):
    """One forward op, then one backward op given the forward's own rstd tensor: the statistic is
    saved, not recomputed."""
    x = random((5, 24), torch.float32, device).requires_grad_()
    w = random((24,), torch.float32, device).requires_grad_()
    with OpCalls() as recorder:
        OP(x, w).sum().backward()
    names = [name for name, _, _ in recorder.calls]
    assert names == ["rms_norm_forward", "rms_norm_backward"], names
    (_, _, (_, saved)), (_, (_, _, _, given), _) = recorder.calls
    assert given.data_ptr() == saved.data_ptr() and torch.equal(given, saved)


def test_rstd_is_not_differentiable(device):
    x = random((4, 16), torch.float32, device).requires_grad_()
    w = random((16,), torch.float32, device).requires_grad_()
    y, rstd = torch.ops.custom_op.rms_norm_forward(x, w, 1e-6)
    assert y.requires_grad and not rstd.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.autograd.grad(rstd.sum(), (x,))


def inputs(shape, dtype, device, seed=0):
    """x, weight and an incoming gradient, the same values for the same seed."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(random(s, dtype, device, generator) for s in (shape, shape[-1:], shape))


def gradients(x, w, grad):
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    return torch.autograd.grad(OP(x, w), (x, w), grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gradients_are_the_same_bits_on_every_run(dtype, device):
    """grad_weight is summed over rows in a fixed order (no atomics) on every backend."""
    args = inputs((300, 200), dtype, device)
    first = gradients(*args)
    for _ in range(3):
        for got, want in zip(gradients(*args), first, strict=True):
            assert torch.equal(got, want)


@pytest.mark.parametrize("shape", [(512, 256), (3000, 40), (4, 70001)], ids=str)
def test_cpu_gradients_are_the_same_bits_whatever_the_thread_count(shape):
    """The CPU backward splits rows into chunks that depend on the shape alone and adds the chunks'
    grad_weight sums in order: one thread and several give the same bits."""
    args = inputs(shape, torch.float32, "cpu")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = gradients(*args)
        torch.set_num_threads(max(2, threads))
        shared = gradients(*args)
    finally:
        torch.set_num_threads(threads)
    for got, want in zip(shared, alone, strict=True):
        assert torch.equal(got, want)
    for got, want in zip(alone, float64_gradients(*args), strict=True):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
