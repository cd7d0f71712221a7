"""rms_norm's bad input raises a clear error naming the op, the argument, what was expected and what
was given: through rms_norm_forward and the backward op too (the shared suites call the public
function and torch.ops.custom_op.rms_norm), and across devices."""

from __future__ import annotations

from functools import partial

import pytest
import torch

import custom_op
from custom_op.testing import random

pytestmark = pytest.mark.isolated  # a crash on bad input fails that case, not the run

ERRORS = (RuntimeError, ValueError, TypeError)
NAME = "custom_op::rms_norm"


def check_message(call, *fragments):
    with pytest.raises(ERRORS) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def forward_op():
    return torch.ops.custom_op.rms_norm_forward


def backward_op():
    return torch.ops.custom_op.rms_norm_backward


def test_forward_op_checks_as_the_function_does(device):
    x, w = random((3, 4), torch.float32, device), random((4,), torch.float32, device)
    check_message(partial(forward_op(), x, random((3,), torch.float32, device), 1e-6),
                  NAME, "argument 'weight'", "shape [4]", "got shape [3]", "[3, 4]")  # fmt: skip
    check_message(partial(forward_op(), x, w.double(), 1e-6), NAME, "same dtype", "float32", "float64")
    check_message(partial(forward_op(), x.int(), w, 1e-6), NAME, "argument 'x'", "got int32")
    check_message(partial(forward_op(), x, w, -1.0), NAME, "argument 'eps'", ">= 0", "got -1")
    check_message(partial(forward_op(), x, w, float("nan")), NAME, "argument 'eps'", "got nan")


def test_eps_of_another_type_is_a_type_error(device):
    x, w = random((3, 4), torch.float32, device), random((4,), torch.float32, device)
    for eps, given in ((True, "bool"), (None, "NoneType"), (torch.tensor(1e-6), "Tensor")):
        with pytest.raises(TypeError, match=rf"{NAME}: argument 'eps' must be a float, got {given}"):
            custom_op.rms_norm(x, w, eps)


def backward_inputs(device, dtype=torch.float32):
    x, w = random((3, 4), dtype, device), random((4,), dtype, device)
    _, rstd = forward_op()(x, w, 1e-6)
    return random((3, 4), dtype, device), x, w, rstd


def test_backward_op_checks_grad(device):
    grad, x, w, rstd = backward_inputs(device)
    check_message(lambda: backward_op()(grad.double(), x, w, rstd), NAME, "argument 'grad'", "float32", "float64")
    check_message(lambda: backward_op()(grad[:2], x, w, rstd), NAME, "argument 'grad'", "[3, 4]", "got [2, 4]")


def test_backward_op_checks_rstd(device):
    """rstd must be what the forward returned: the accumulate dtype, one value per row."""
    grad, x, w, rstd = backward_inputs(device)
    check_message(lambda: backward_op()(grad, x, w, rstd.double()), NAME, "argument 'rstd'", "float32", "float64")
    check_message(lambda: backward_op()(grad, x, w, rstd[:2]), NAME, "argument 'rstd'", "[3]", "got [2]")
    half = backward_inputs(device, torch.float16)
    check_message(lambda: backward_op()(*half[:3], half[3].half()), NAME, "argument 'rstd'",
                  "accumulate dtype", "float32", "got float16")  # fmt: skip


def test_backward_op_checks_weight(device):
    grad, x, w, rstd = backward_inputs(device)
    check_message(lambda: backward_op()(grad, x, w[:3], rstd), NAME, "argument 'weight'", "shape [4]", "got shape [3]")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_device_mismatch_cuda():
    x = random((3, 4), torch.float32, "cuda")
    w = random((4,), torch.float32, "cpu")
    for fn in (custom_op.rms_norm, torch.ops.custom_op.rms_norm, forward_op()):
        check_message(partial(fn, x, w, 1e-6), NAME, "same device", "cuda:0", "cpu")
        check_message(partial(fn, x.cpu(), w.cuda(), 1e-6), NAME, "same device", "cpu", "cuda:0")
    grad, x, w, rstd = backward_inputs("cuda")
    check_message(lambda: backward_op()(grad, x, w, rstd.cpu()), NAME, "argument 'rstd'", "cuda:0", "cpu")
    check_message(lambda: backward_op()(grad.cpu(), x, w, rstd), NAME, "argument 'grad'", "cuda:0", "cpu")
