"""cross_entropy's gradient (softmax - onehot, scaled by the incoming per-row gradient, in the
logits' dtype), autocast, opcheck of the backward op, and torch.compile through torch.ops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import custom_op
from custom_op.testing import RTOL, random


def _grad(function, logits, labels, grad, *args):
    leaf = logits.detach().requires_grad_()
    (g,) = torch.autograd.grad(function(leaf, labels, *args), leaf, grad)
    return g


def test_gradient_is_softmax_minus_onehot_scaled_by_the_rows_grad(dtype, device):
    logits = random((16, 300), dtype, device)
    labels = torch.randint(0, 300, (16,), device=device)
    labels[3] = -100
    grad = random((16,), torch.float64 if dtype == torch.float64 else torch.float32, device)
    got = _grad(custom_op.cross_entropy, logits, labels, grad)
    assert got.dtype == dtype and got.shape == logits.shape
    softmax = torch.softmax(logits.double(), 1)
    onehot = F.one_hot(labels.clamp(min=0), 300).double()
    want = (softmax - onehot) * grad.double()[:, None]
    want[3] = 0  # an ignored row
    tol = 4 * RTOL[dtype]
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * want.abs().max().item())
    assert (got[3] == 0).all()


@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_gradient_equals_f_cross_entropys(ignore_index, device):
    logits = random((32, 1000), torch.float32, device) * 2
    labels = torch.randint(0, 1000, (32,), device=device)
    labels[::5] = ignore_index
    grad = random((32,), torch.float32, device)
    got = _grad(custom_op.cross_entropy, logits, labels, grad, ignore_index)
    want = _grad(
        lambda x, y, i: F.cross_entropy(x, y, reduction="none", ignore_index=i), logits, labels, grad, ignore_index
    )
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_mean_over_rows_trains_as_f_cross_entropys_mean(device):
    """.mean() passes one value back (an expanded scalar, read in place by the backward)."""
    logits = random((64, 500), torch.bfloat16, device)
    labels = torch.randint(0, 500, (64,), device=device)
    got = _grad(lambda x, y: custom_op.cross_entropy(x, y).mean(), logits, labels, None)
    want = _grad(lambda x, y: F.cross_entropy(x.float(), y), logits, labels, None)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=1.6e-2, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_autocast_reads_the_logits_dtype_and_accumulates_in_float32(dtype, device):
    """No cast under autocast: the same bits as without it, the loss in float32, the gradient in
    the logits' dtype."""
    autocast = torch.bfloat16 if device == "cpu" else torch.float16
    logits = random((8, 256), dtype, device).requires_grad_()
    labels = torch.randint(0, 256, (8,), device=device)
    with torch.autocast(device, dtype=autocast):
        inside = custom_op.cross_entropy(logits, labels)
    (grad_inside,) = torch.autograd.grad(inside.sum(), logits)
    outside = custom_op.cross_entropy(logits, labels)
    (grad_outside,) = torch.autograd.grad(outside.sum(), logits)
    assert inside.dtype == torch.float32 and grad_inside.dtype == dtype
    assert torch.equal(inside, outside) and torch.equal(grad_inside, grad_outside)


def test_float64_under_autocast_stays_float64(device):
    autocast = torch.bfloat16 if device == "cpu" else torch.float16
    logits = random((4, 10), torch.float64, device)
    with torch.autocast(device, dtype=autocast):
        assert custom_op.cross_entropy(logits, torch.zeros(4, dtype=torch.int64, device=device)).dtype == torch.float64


def test_opcheck_backward_op(device):
    backward = torch.ops.custom_op.cross_entropy_backward.default
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        logits = random((5, 13), dtype, device)
        labels = torch.tensor([0, 12, -100, 4, 7], device=device)
        loss, lse = torch.ops.custom_op.cross_entropy_forward(logits, labels)
        torch.library.opcheck(backward, (random(loss.shape, loss.dtype, device), logits, labels, lse, -100))


def test_compile_fullgraph_forward_and_backward_through_torch_ops(device):
    torch._dynamo.reset()
    logits = random((12, 77), torch.float32, device).requires_grad_()
    labels = torch.randint(0, 77, (12,), device=device)
    labels[0] = -1

    def loss(x, y):
        return torch.ops.custom_op.cross_entropy(x, y, -1).mean()

    compiled = torch.compile(loss, fullgraph=True)
    got = torch.autograd.grad(compiled(logits, labels), logits)[0]
    want = torch.autograd.grad(loss(logits, labels), logits)[0]
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(compiled(logits, labels), loss(logits, labels))


def test_compile_dynamic_shapes(device):
    torch._dynamo.reset()
    compiled = torch.compile(custom_op.cross_entropy, fullgraph=True, dynamic=True, backend="aot_eager")
    for rows, classes in ((3, 16), (7, 33), (11, 5)):
        logits = random((rows, classes), torch.float32, device)
        labels = torch.randint(0, classes, (rows,), device=device)
        torch.testing.assert_close(compiled(logits, labels), custom_op.cross_entropy(logits, labels))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_gradients_are_the_float32_gradient_rounded_once(dtype):
    """The CPU kernels compute in float32 and round each gradient once, as a cast of the float32
    result (the same inputs) rounds it: the same bits, infinities and subnormals included (NaN
    where it is NaN: its sign and payload may differ)."""
    logits = random((6, 3000), dtype, "cpu") * 8
    logits[0, :5] = float("nan")
    logits[1, 7] = float("inf")
    labels = torch.tensor([1, 2, 2999, 0, -100, 17])
    grad = torch.tensor([1.0, 2.0, 1e-30, 3e4, 1.0, -70000.0])  # subnormal and overflowing products
    got = _grad(custom_op.cross_entropy, logits, labels, grad)
    want = _grad(custom_op.cross_entropy, logits.float(), labels, grad).to(dtype)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan) and nan[:2].all()
    assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16))
