"""weighted_sum_of_squares' backward op under opcheck, and dynamic shapes under torch.compile."""

from __future__ import annotations

import torch

import custom_op
from custom_op.ops.weighted_sum_of_squares.testing import samples
from custom_op.testing import random


def test_opcheck_backward_op(device):
    backward = torch.ops.custom_op.weighted_sum_of_squares_backward.default
    for sample in samples(device, torch.float64, [(5,), (3, 8), (2, 3, 8)]):
        x, w = sample.args
        grad = random(custom_op.weighted_sum_of_squares(x, w).shape, x.dtype, device)
        torch.library.opcheck(backward, (grad, x, w))


def test_compile_dynamic_shapes(device):
    torch._dynamo.reset()
    compiled = torch.compile(custom_op.weighted_sum_of_squares, fullgraph=True, dynamic=True, backend="aot_eager")
    for rows in (3, 7, 11):
        x = random((rows, 16), torch.float32, device)
        w = random((16,), torch.float32, device)
        torch.testing.assert_close(compiled(x, w), custom_op.weighted_sum_of_squares(x, w))
