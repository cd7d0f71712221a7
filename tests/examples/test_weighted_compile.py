"""The example ops' backward ops under opcheck, and dynamic shapes under torch.compile."""

from __future__ import annotations

import pytest
import torch
from conftest import random

import custom_op
from custom_op.ops.weighted_square.testing import weighted_samples

OPS = {"weighted_square": custom_op.weighted_square, "weighted_sum_of_squares": custom_op.weighted_sum_of_squares}


@pytest.mark.parametrize("op", OPS)
def test_opcheck_backward_ops(op, device):
    backward = getattr(torch.ops.custom_op, f"{op}_backward").default
    for sample in weighted_samples(device, torch.float64, [(5,), (3, 8), (2, 3, 8)]):
        x, w = sample.args
        grad = random(OPS[op](x, w).shape, x.dtype, device)
        torch.library.opcheck(backward, (grad, x, w))


def test_opcheck_zero_dim(device):
    x, w = random((), torch.float64, device), random((), torch.float64, device)
    torch.library.opcheck(torch.ops.custom_op.weighted_square.default, (x, w))


def test_compile_dynamic_shapes(device):
    torch._dynamo.reset()
    compiled = torch.compile(custom_op.weighted_sum_of_squares, fullgraph=True, dynamic=True, backend="aot_eager")
    for rows in (3, 7, 11):
        x = random((rows, 16), torch.float32, device)
        w = random((16,), torch.float32, device)
        torch.testing.assert_close(compiled(x, w), custom_op.weighted_sum_of_squares(x, w))
