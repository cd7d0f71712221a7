"""weighted_square's bad input raises a clear error naming the op, the argument, what was expected
and what was given."""

from __future__ import annotations

from functools import partial

import pytest
import torch

import custom_op
from custom_op.testing import random

pytestmark = pytest.mark.isolated  # a crash on bad input fails that case, not the run

ERRORS = (RuntimeError, ValueError, TypeError)


def check_message(call, *fragments):
    with pytest.raises(ERRORS) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def through_both():
    """The Python API and the registered op (torch.ops.custom_op.weighted_square)."""
    return [custom_op.weighted_square, torch.ops.custom_op.weighted_square]


@pytest.mark.parametrize(
    ("x_shape", "w_shape"),
    [((3, 4), (3,)), ((3, 4), (4, 3)), ((3, 4), (1, 4)), ((2, 3, 4), (3, 4)), ((3, 4), ()), ((3, 4), (12,))],
    ids=str,
)
def test_shape_mismatch(x_shape, w_shape, device):
    x = random(x_shape, torch.float32, device)
    w = random(w_shape, torch.float32, device)
    expected = "[" + ", ".join(map(str, x_shape)) + "]"
    given = "[" + ", ".join(map(str, w_shape)) + "]"
    for fn in through_both():
        check_message(
            partial(fn, x, w),
            "custom_op::weighted_square",
            "argument 'w'",
            f"x's shape {expected}",
            f"x.shape[-1] = {x_shape[-1]}",
            f"got shape {given}",
        )


def test_zero_dim_weight_shape_for_zero_dim_x(device):
    x = random((), torch.float32, device)
    check_message(lambda: custom_op.weighted_square(x, random((1,), torch.float32, device)), "argument 'w'", "[]")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.gpu
def test_device_mismatch_cuda():
    x = random((3, 4), torch.float32, "cuda")
    w = random((4,), torch.float32, "cpu")
    for fn in through_both():
        check_message(partial(fn, x, w), "custom_op::weighted_square", "same device", "cuda:0", "cpu")
        check_message(partial(fn, w.expand(3, 4), x[0]), "custom_op::weighted_square", "same device", "cuda:0", "cpu")


def test_backward_op_checks_grad(device):
    backward = torch.ops.custom_op.weighted_square_backward
    x = random((3, 4), torch.float32, device)
    w = random((4,), torch.float32, device)
    good = custom_op.weighted_square(x, w)
    check_message(lambda: backward(good.double(), x, w), "argument 'grad'", "float32", "float64")
    check_message(lambda: backward(random((7,), torch.float32, device), x, w), "argument 'grad'", "[7]")
