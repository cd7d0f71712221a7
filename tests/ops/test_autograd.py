"""Every operator of the registry: gradients against eager autograd in float64, and gradcheck."""

from __future__ import annotations

import pytest
import torch

from custom_op.testing import random


def _grads(function, sample, grad):
    inputs = [a for a in sample.args if isinstance(a, torch.Tensor) and a.requires_grad]
    return inputs, torch.autograd.grad(function(*sample.args, **sample.kwargs), inputs, grad)


def test_gradients_match_eager_float64(spec, dtype, device):
    for sample in spec.samples(device, dtype):
        if any(t.numel() == 0 for t in sample.tensors) or sample.tensors[0].numel() > 2**17:
            continue
        mine = sample.detached(requires_grad=True)
        out = spec.function(*mine.args, **mine.kwargs)
        grad = random(out.shape, dtype, device)
        inputs, got = _grads(spec.function, mine, grad)
        ref_sample = sample.detached(torch.float64, requires_grad=True)
        _, want = _grads(spec.reference, ref_sample, grad.double())
        for i, (g, r) in enumerate(zip(got, want, strict=True)):
            assert g.dtype == dtype and g.shape == r.shape, f"{sample.label}: input {i}"
            assert torch.isfinite(r).all(), f"{sample.label}: the reference's gradient of input {i} is not finite"
            # Summed gradients (a broadcast weight) cancel: bound the error by the largest one too.
            tol = 4 * spec.rtol[dtype]
            msg = f"{sample.label}: gradient of input {i}"
            torch.testing.assert_close(g.double(), r, rtol=tol, atol=tol * r.abs().max().item(), msg=msg)


def test_gradcheck_float64(spec, device):
    for sample in spec.small_float64_samples(device):
        leaves = sample.detached(requires_grad=True)
        assert torch.autograd.gradcheck(lambda *a, _s=leaves: spec.function(*a, **_s.kwargs), leaves.args), sample.label


@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "inputs_without_grad"])
def test_no_graph_without_grad(spec, context, device):
    """Without a gradient to compute, the call records no graph and gives the same values."""
    sample = next(iter(spec.samples(device, torch.float32)))
    sample = sample.detached(requires_grad=context != "inputs_without_grad")
    guard = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}.get(context)
    with guard() if guard else torch.enable_grad():
        out = spec.function(*sample.args, **sample.kwargs)
    assert out.grad_fn is None and not out.requires_grad
    spec.check(out, sample)


@pytest.mark.isolated  # in a fresh process: the warning filters a user has, not pytest's
def test_a_backward_through_the_kernel_alone_is_an_error_not_a_missing_gradient(spec, device):
    """torch.ops.<namespace>.<op> has no autograd of its own: backpropagating through it raises
    (PyTorch's default would warn and drop its gradient); the Python function is differentiable."""
    sample = next(s for s in spec.small_float64_samples(device) if s.tensors[0].numel() > 0)
    leaves = sample.detached(requires_grad=True)
    kernel_out = spec.overload("custom_op")(*leaves.args, **leaves.kwargs)
    with pytest.raises(UserWarning, match=rf"custom_op::{spec.name}: an autograd kernel was not registered"):
        kernel_out.sum().backward()
    function_out = spec.function(*leaves.args, **leaves.kwargs)
    torch.testing.assert_close(function_out, kernel_out.detach())
    assert function_out.grad_fn is not None
