"""cross_entropy's bad input raises a clear error naming the op, the argument, what was expected
and what was given; a label out of range is one on the CPU."""

from __future__ import annotations

from functools import partial

import pytest
import torch

import custom_op
from custom_op.testing import random

pytestmark = pytest.mark.isolated  # a crash on bad input fails that case, not the run

OP = "custom_op::cross_entropy"
ERRORS = (RuntimeError, ValueError, TypeError)


def check_message(call, *fragments, error=ERRORS):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def through_both():
    """The Python API and the registered op (torch.ops.custom_op.cross_entropy)."""
    return [custom_op.cross_entropy, torch.ops.custom_op.cross_entropy]


@pytest.mark.parametrize(("label", "row"), [(5, 1), (-1, 2), (2**40, 0)], ids=str)
def test_label_out_of_range_on_the_cpu(label, row):
    logits = random((3, 5), torch.float32, "cpu")
    labels = torch.tensor([0, 1, 2])
    labels[row] = label
    for fn in through_both():
        check_message(
            partial(fn, logits, labels),
            OP,
            "argument 'labels'",
            "class indices in [0, 5) or ignore_index -100",
            f"got {label} at labels[{row}]",
        )
    check_message(partial(custom_op.cross_entropy, logits, labels), error=ValueError)


def test_ignore_index_is_never_out_of_range():
    logits = random((2, 5), torch.float32, "cpu")
    out = custom_op.cross_entropy(logits, torch.tensor([17, 3]), 17)
    assert out[0] == 0 and out[1] > 0
    check_message(
        partial(custom_op.cross_entropy, logits, torch.tensor([-100, 3]), 17),
        "ignore_index 17",
        "got -100 at labels[0]",
    )


def test_labels_of_another_length_and_dtype(device):
    logits = random((4, 6), torch.float32, device)
    for fn in through_both():
        check_message(
            partial(fn, logits, torch.zeros(3, dtype=torch.int64, device=device)),
            OP,
            "argument 'labels'",
            "must have shape [4] (logits.shape[0] = 4)",
            "got shape [3]",
        )
        check_message(
            partial(fn, logits, torch.zeros(4, dtype=torch.int32, device=device)),
            OP,
            "argument 'labels'",
            "dtype int64",
            "got int32",
        )


def test_logits_not_2d_or_not_floating(device):
    labels = torch.zeros(2, dtype=torch.int64, device=device)
    for fn in through_both():
        check_message(
            partial(fn, random((2, 3, 4), torch.float32, device), labels),
            OP,
            "argument 'logits'",
            "2-D [N, V]",
            "got shape [2, 3, 4]",
        )
        check_message(
            partial(fn, torch.zeros(2, 4, dtype=torch.int64, device=device), labels),
            OP,
            "argument 'logits'",
            "float32, float64, float16 or bfloat16",
            "got int64",
        )
        check_message(partial(fn, random((2, 0), torch.float32, device), labels), "at least one class", "[2, 0]")


def test_ignore_index_must_be_an_int(device):
    logits = random((2, 3), torch.float32, device)
    labels = torch.zeros(2, dtype=torch.int64, device=device)
    for bad in (1.0, True, "-100", None):
        check_message(
            partial(custom_op.cross_entropy, logits, labels, bad),
            OP,
            "argument 'ignore_index' must be an int",
            f"got {type(bad).__name__}",
            error=TypeError,
        )
    check_message(partial(torch.ops.custom_op.cross_entropy, logits, labels, 1.5), "ignore_index")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.gpu
def test_labels_on_another_device():
    logits = random((2, 3), torch.float32, "cuda")
    for fn in through_both():
        check_message(
            partial(fn, logits, torch.zeros(2, dtype=torch.int64)),
            OP,
            "argument 'labels'",
            "on logits' device cuda:0",
            "got cpu",
        )


def test_backward_op_checks_grad_and_lse(device):
    backward = torch.ops.custom_op.cross_entropy_backward
    logits = random((3, 4), torch.bfloat16, device)
    labels = torch.tensor([0, 1, 2], device=device)
    loss, lse = torch.ops.custom_op.cross_entropy_forward(logits, labels)
    check_message(
        lambda: backward(loss.bfloat16(), logits, labels, lse, -100),
        OP,
        "argument 'grad'",
        "dtype float32 (the accumulate dtype of logits's bfloat16)",
        "got bfloat16",
    )
    check_message(lambda: backward(loss, logits, labels, lse[:2], -100), "argument 'lse'", "shape [3], got [2]")
    if device == "cpu":
        bad = torch.tensor([0, 9, 2])
        check_message(lambda: backward(loss, logits, bad, lse, -100), "got 9 at labels[1]")
