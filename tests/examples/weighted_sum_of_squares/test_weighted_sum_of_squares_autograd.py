"""weighted_sum_of_squares' gradients for x and w: one input requiring grad, double backward refused, the
backward op following torch's deterministic mode."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import custom_op
from custom_op.testing import RTOL, random

OP = custom_op.weighted_sum_of_squares


def backward_op():
    return torch.ops.custom_op.weighted_sum_of_squares_backward.default


def test_gradient_of_one_input_only(device):
    x = random((3, 8), torch.float32, device).requires_grad_()
    w = random((8,), torch.float32, device)
    OP(x, w).sum().backward()
    assert w.grad is None
    torch.testing.assert_close(x.grad, (2 * w * x).detach())


@pytest.mark.isolated
def test_double_backward_raises_clear_error(device):
    x = random((3, 4), torch.float64, device).requires_grad_()
    w = random((4,), torch.float64, device).requires_grad_()
    (gx,) = torch.autograd.grad(OP(x, w).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"custom_op::weighted_sum_of_squares: double backward .* not supported"):
        gx.sum().backward()


def test_one_input_with_grad_builds_the_graph(device):
    """One input that requires grad is enough for the autograd path (and its gradient)."""
    x = random((3, 8), torch.float32, device)
    w = random((8,), torch.float32, device).requires_grad_()
    y = OP(x, w)
    assert y.grad_fn is not None
    (gw,) = torch.autograd.grad(y.sum(), (w,))
    ref_gw = (x * x).reshape(-1, 8).sum(0)
    torch.testing.assert_close(gw, ref_gw, rtol=RTOL[torch.float32], atol=0)


class BackwardCalls(TorchDispatchMode):
    """Records the deterministic argument of every call of the library's backward ops."""

    def __init__(self):
        super().__init__()
        self.deterministic = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "custom_op" and func.__name__.endswith("_backward.default"):
            self.deterministic.append(args[3] if len(args) > 3 else kwargs.get("deterministic", False))
        return func(*args, **kwargs)


@pytest.mark.parametrize("mode", ["default", "deterministic"])
def test_backward_follows_torch_deterministic_mode(mode, device, request):
    """The backward op is told to sum a 1-D w's gradient in a fixed order exactly when
    torch.use_deterministic_algorithms(True) is on, as PyTorch's own ops follow that switch."""
    if mode == "deterministic":
        request.getfixturevalue("deterministic_algorithms")
    x = random((64, 32), torch.float32, device).requires_grad_()
    w = random((32,), torch.float32, device).requires_grad_()
    with BackwardCalls() as calls:
        OP(x, w).sum().backward()
    assert calls.deterministic == [mode == "deterministic"]


def test_backward_op_deterministic_argument_defaults_to_false(device):
    backward = backward_op()
    argument = backward._schema.arguments[3]
    assert (argument.name, argument.default_value) == ("deterministic", False)
    x = random((8, 16), torch.float32, device)
    w = random((16,), torch.float32, device)
    grad = random(OP(x, w).shape, torch.float32, device)
    for got, ref in zip(backward(grad, x, w), backward(grad, x, w, True), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)
