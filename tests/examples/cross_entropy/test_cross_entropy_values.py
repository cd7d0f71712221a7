"""cross_entropy's loss against F.cross_entropy and float64: ignored rows, magnitudes, long rows,
output dtypes, and its exp against the float64 exp through the backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import custom_op
from custom_op.testing import random

HALF = (torch.float16, torch.bfloat16)


def baseline(logits, labels, ignore_index=-100):
    """What users write: half logits cast to float32 first."""
    x = logits.float() if logits.dtype in HALF else logits
    return F.cross_entropy(x, labels, reduction="none", ignore_index=ignore_index)


def float64_loss(logits, labels, ignore_index=-100):
    return F.cross_entropy(logits.double(), labels, reduction="none", ignore_index=ignore_index)


@pytest.mark.parametrize("shape", [(6, 5), (64, 1000), (8, 32000), (3, 70001)], ids=str)
def test_equals_f_cross_entropy(shape, dtype, device):
    torch.manual_seed(0)
    logits = random(shape, dtype, device) * 3
    labels = torch.randint(0, shape[1], (shape[0],), device=device)
    labels[1] = -100
    out = custom_op.cross_entropy(logits, labels)
    want = baseline(logits, labels)
    assert out.dtype == want.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)
    assert out[1] == 0


def test_the_registered_op_takes_ignore_index_positionally_and_by_default(device):
    logits = random((4, 9), torch.float32, device)
    labels = torch.tensor([0, 3, 8, 3], device=device)
    op = torch.ops.custom_op.cross_entropy
    torch.testing.assert_close(op(logits, labels), custom_op.cross_entropy(logits, labels), rtol=0, atol=0)
    torch.testing.assert_close(op(logits, labels, 3), baseline(logits, labels, 3))


@pytest.mark.parametrize("ignore_index", [-100, -1, 0, 4, 1000])
def test_a_label_equal_to_ignore_index_is_ignored(ignore_index, device):
    logits = random((6, 5), torch.float32, device)
    labels = torch.tensor([0, 4, ignore_index, 2, ignore_index, 1], device=device)
    out = custom_op.cross_entropy(logits, labels, ignore_index)
    ignored = labels == ignore_index
    assert (out[ignored] == 0).all() and (out[~ignored] > 0).all()
    torch.testing.assert_close(out, float64_loss(logits, labels, ignore_index).float())


def test_an_all_ignored_batch_gives_zeros_not_nan(dtype, device):
    logits = random((5, 12), dtype, device)
    labels = torch.full((5,), -100, device=device)
    out = custom_op.cross_entropy(logits, labels)
    assert torch.equal(out, torch.zeros_like(out))
    assert out.mean().item() == 0  # F.cross_entropy's default mean over no rows is NaN
    leaf = logits.detach().requires_grad_()
    (grad,) = torch.autograd.grad(custom_op.cross_entropy(leaf, labels).mean(), leaf)
    assert torch.equal(grad, torch.zeros_like(grad))


@pytest.mark.parametrize("magnitude", [1e4, 3e38])
def test_huge_logits_are_stable(magnitude, device):
    """exp overflows float32 past 88: the row's max is taken out first; at float32's largest
    values the differences overflow to -inf, whose exp is 0."""
    logits = torch.tensor([[1.0, -1.0, 0.5], [-1.0, 1.0, 0.0]], device=device) * magnitude
    labels = torch.tensor([0, 2], device=device)
    out = custom_op.cross_entropy(logits, labels)
    torch.testing.assert_close(out, float64_loss(logits, labels).float())


def test_masked_classes(dtype, device):
    """-inf logits (masked classes) add nothing: no NaN from exp(-inf - -inf)."""
    logits = random((3, 50), dtype, device)
    logits[:2, 10:] = float("-inf")
    logits[2, :30] = float("-inf")  # a row whose first pieces are all masked
    labels = torch.tensor([0, 9, 35], device=device)
    out = custom_op.cross_entropy(logits, labels)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, float64_loss(logits, labels).to(out.dtype), rtol=1e-5, atol=1e-5)


def test_nan_logits_give_nan_loss(device):
    logits = random((2, 40), torch.float32, device)
    logits[0, 17] = float("nan")
    out = custom_op.cross_entropy(logits, torch.tensor([3, 3], device=device))
    assert out[0].isnan() and out[1].isfinite()


@pytest.mark.parametrize("rows", [1, 2])
def test_rows_of_262144_classes(rows, dtype):
    """Rows this long are split across threads (pieces merged in a fixed order)."""
    torch.manual_seed(1)
    logits = random((rows, 262144), dtype, "cpu") * 4
    labels = torch.randint(0, 262144, (rows,))
    out = custom_op.cross_entropy(logits, labels)
    want = float64_loss(logits, labels)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert ((out.double() - want).abs() <= tol * want.abs().clamp(min=1)).all()
    torch.testing.assert_close(custom_op.cross_entropy(logits, labels), out, rtol=0, atol=0)  # the same bits


def test_same_bits_whatever_the_number_of_threads():
    logits = random((3, 100000), torch.float32, "cpu")
    labels = torch.tensor([0, 5, 99999])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = custom_op.cross_entropy(logits, labels)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(custom_op.cross_entropy(logits, labels), one)


def test_output_is_contiguous_per_row_from_strided_logits(device):
    base = random((40, 24), torch.float32, device)
    logits = base.t()[:, 1:]  # [24, 39], neither dimension contiguous, offset
    labels = torch.arange(24, device=device) % 39
    out = custom_op.cross_entropy(logits, labels)
    assert out.shape == (24,) and out.is_contiguous()
    torch.testing.assert_close(out, float64_loss(logits, labels).float())


@pytest.mark.parametrize(("dtype", "ulps"), [(torch.float32, 1), (torch.float64, 2)], ids=str)
def test_the_cpu_exp_is_within_its_stated_ulps(dtype, ulps):
    """The CPU backward writes g * exp(x - lse) for each logit but the label's: with g = 1, rows
    [0 (the label), t, -1000, ...] put exp's argument t - lse anywhere in (-inf, 0] (and, past
    its range, -1000 - lse gives 0). Each result within `ulps` of the correctly rounded exp of the
    same argument (csrc/common/cpu_exp.h), its subnormal results 0."""
    low = -110.0 if dtype == torch.float32 else -760.0
    t = torch.linspace(low, 40.0, 20001, dtype=dtype)
    x = torch.full((t.numel(), 64), -1000.0, dtype=dtype)
    x[:, 0], x[:, 1] = 0, t
    labels = torch.zeros(t.numel(), dtype=torch.int64)
    loss, lse = torch.ops.custom_op.cross_entropy_forward(x, labels, -100)
    grad = torch.ops.custom_op.cross_entropy_backward(torch.ones_like(loss), x, labels, lse, -100)
    assert (grad[:, 2:] == 0).all()
    got, argument = grad[:, 1], t - lse  # the argument rounded as the kernel rounds it
    exact = torch.exp(argument.double()) if dtype == torch.float32 else torch.exp(argument)
    want = exact.to(dtype)  # float32: correctly rounded; float64: within an ulp of it, allowed for
    allowed = ulps if dtype == torch.float32 else ulps + 1
    normal = want >= torch.finfo(dtype).tiny
    bits = torch.int32 if dtype == torch.float32 else torch.int64
    apart = (got[normal].view(bits) - want[normal].view(bits)).abs()  # ulps between positive floats
    assert apart.max() <= allowed, f"{apart.max()} ulps at {argument[normal][apart.argmax()]}"
    assert (got[~normal] == 0).all()
    assert normal.sum() > 0.7 * t.numel() and (argument[normal].max() > -1e-6)  # the range was covered
