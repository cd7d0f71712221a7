"""Autocast policy: both ops run in float32 under torch.autocast (as PyTorch's pow and sum do)."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_matches_reference, random

import custom_op

OPS = {"weighted_square": custom_op.weighted_square, "weighted_sum_of_squares": custom_op.weighted_sum_of_squares}


def autocast_dtype(device):
    return torch.bfloat16 if device == "cpu" else torch.float16


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("input_dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_runs_in_float32_under_autocast(op, input_dtype, device):
    x = random((4, 16), input_dtype, device)
    w = random((16,), input_dtype, device)
    with torch.autocast(device, dtype=autocast_dtype(device)):
        out = OPS[op](x, w)
    assert out.dtype == torch.float32
    assert_matches_reference(op, out, x.float(), w.float())


@pytest.mark.isolated
@pytest.mark.parametrize("op", OPS)
def test_mixed_dtypes_are_reconciled_by_autocast(op, device):
    x = random((4, 16), torch.bfloat16, device)
    w = random((16,), torch.float32, device)
    with pytest.raises(ValueError, match="same dtype"):
        OPS[op](x, w)
    with torch.autocast(device, dtype=autocast_dtype(device)):
        out = OPS[op](x, w)
    assert out.dtype == torch.float32


@pytest.mark.parametrize("op", OPS)
def test_gradients_under_autocast(op, device):
    x = random((3, 8), torch.float32, device).requires_grad_()
    w = random((8,), torch.float32, device).requires_grad_()
    with torch.autocast(device, dtype=autocast_dtype(device)):
        out = OPS[op](x, w)
    out.sum().backward()
    assert x.grad.dtype == torch.float32
    torch.testing.assert_close(x.grad, (2 * w * x).detach())


@pytest.mark.parametrize("op", OPS)
def test_float64_stays_float64(op, device):
    # As in PyTorch's own autocast, float64 is never cast down.
    x = random((3, 8), torch.float64, device)
    w = random((8,), torch.float64, device)
    with torch.autocast(device, dtype=autocast_dtype(device)):
        out = OPS[op](x, w)
    assert out.dtype == torch.float64
    assert_matches_reference(op, out, x, w)
