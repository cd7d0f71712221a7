"""torch.library.opcheck and torch.compile(fullgraph=True), forward and backward."""

from __future__ import annotations

import pytest
import torch
from conftest import random, weight_shape

import custom_op

OPS = {"weighted_square": custom_op.weighted_square, "weighted_sum_of_squares": custom_op.weighted_sum_of_squares}


def samples(device):
    """Inputs for opcheck, contiguous and not, both weight forms, with and without grad."""
    for dtype in (torch.float32, torch.float64):
        for requires_grad in (False, True):
            base = random((12, 10), dtype, device)
            cases = [
                (random((3, 8), dtype, device), random((8,), dtype, device)),
                (random((2, 3, 8), dtype, device), random((2, 3, 8), dtype, device)),
                (base.t(), random((12,), dtype, device)),
                (base[::2, 1:9], random((6, 8), dtype, device)),
                (random((5,), dtype, device), random((5,), dtype, device)),
            ]
            for x, w in cases:
                yield x.detach().requires_grad_(requires_grad), w.detach().requires_grad_(requires_grad)


@pytest.mark.parametrize("op", OPS)
def test_opcheck(op, device):
    for x, w in samples(device):
        torch.library.opcheck(getattr(torch.ops.custom_op, op).default, (x, w))


@pytest.mark.parametrize("op", OPS)
def test_opcheck_backward_ops(op, device):
    backward = getattr(torch.ops.custom_op, f"{op}_backward").default
    for x, w in samples(device):
        x, w = x.detach(), w.detach()
        grad = random(OPS[op](x, w).shape, x.dtype, device)
        torch.library.opcheck(backward, (grad, x, w))


def test_opcheck_zero_dim(device):
    x, w = random((), torch.float64, device), random((), torch.float64, device)
    torch.library.opcheck(torch.ops.custom_op.weighted_square.default, (x, w))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", ["full", "per_feature"])
def test_fake_kernel_shape_and_strides_match_real(op, form, device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = random((6, 5), torch.float32, device).t()
    w = random(weight_shape(x.shape, form), torch.float32, device)
    real = OPS[op](x, w)
    with FakeTensorMode() as mode:
        fake = OPS[op](mode.from_tensor(x), mode.from_tensor(w))
    assert fake.shape == real.shape and fake.stride() == real.stride() and fake.dtype == real.dtype


@pytest.mark.parametrize("op", OPS)
def test_compile_fullgraph_forward_and_backward(op, device):
    torch._dynamo.reset()

    def loss(x, w):
        return (OPS[op](x, w) * 0.5).sum()

    compiled = torch.compile(loss, fullgraph=True)
    x = random((16, 32), torch.float32, device).requires_grad_()
    w = random((32,), torch.float32, device).requires_grad_()
    got = torch.autograd.grad(compiled(x, w), (x, w))
    want = torch.autograd.grad(loss(x, w), (x, w))
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r)
    torch.testing.assert_close(compiled(x, w), loss(x, w))


def test_compile_dynamic_shapes(device):
    torch._dynamo.reset()
    compiled = torch.compile(custom_op.weighted_sum_of_squares, fullgraph=True, dynamic=True, backend="aot_eager")
    for rows in (3, 7, 11):
        x = random((rows, 16), torch.float32, device)
        w = random((16,), torch.float32, device)
        torch.testing.assert_close(compiled(x, w), custom_op.weighted_sum_of_squares(x, w))


@pytest.mark.isolated
def test_compile_reports_bad_input(device):
    torch._dynamo.reset()
    compiled = torch.compile(custom_op.weighted_square, fullgraph=True, backend="aot_eager")
    x = random((3, 4), torch.float32, device)
    with pytest.raises(Exception, match=r"custom_op::weighted_square: argument 'w' must have x's shape \[3, 4\]"):
        compiled(x, random((5,), torch.float32, device))


def test_fx_symbolic_trace_records_the_ops(device):
    """torch.fx traces the public functions (its proxies are not tensors) into the ops themselves."""

    class Model(torch.nn.Module):
        def forward(self, x, w):
            return custom_op.weighted_square(x, w).sum(-1) + custom_op.weighted_sum_of_squares(x, w)

    traced = torch.fx.symbolic_trace(Model())
    targets = {n.target for n in traced.graph.nodes if n.op == "call_function"}
    assert torch.ops.custom_op.weighted_square.default in targets
    assert torch.ops.custom_op.weighted_sum_of_squares.default in targets
    x, w = random((3, 8), torch.float32, device), random((8,), torch.float32, device)
    torch.testing.assert_close(traced(x, w), Model()(x, w))
