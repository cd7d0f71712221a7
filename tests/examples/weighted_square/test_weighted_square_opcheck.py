"""weighted_square's backward op under opcheck, and the op on 0-dim inputs."""

from __future__ import annotations

import torch

import custom_op
from custom_op.ops.weighted_square.testing import weighted_samples
from custom_op.testing import random


def test_opcheck_backward_op(device):
    backward = torch.ops.custom_op.weighted_square_backward.default
    for sample in weighted_samples(device, torch.float64, [(5,), (3, 8), (2, 3, 8)]):
        x, w = sample.args
        grad = random(custom_op.weighted_square(x, w).shape, x.dtype, device)
        torch.library.opcheck(backward, (grad, x, w))


def test_opcheck_zero_dim(device):
    x, w = random((), torch.float64, device), random((), torch.float64, device)
    torch.library.opcheck(torch.ops.custom_op.weighted_square.default, (x, w))
