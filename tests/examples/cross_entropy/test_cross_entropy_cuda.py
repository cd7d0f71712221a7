"""cross_entropy on CUDA: the CPU's results on the benchmark's shapes, rows at every offset from
a 16-byte boundary, an out-of-range label (NaN, no synchronization), streams and devices."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import custom_op
from custom_op.testing import random

HAS_CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")]


def check(logits, labels, ignore_index=-100):
    """Loss and gradient against float64 on the GPU (the benchmark's shapes are large)."""
    leaf = logits.detach().requires_grad_()
    loss = custom_op.cross_entropy(leaf, labels, ignore_index)
    grad = torch.rand_like(loss)
    (got,) = torch.autograd.grad(loss, leaf, grad)
    ref_leaf = logits.detach().double().requires_grad_()
    want_loss = F.cross_entropy(ref_leaf, labels, reduction="none", ignore_index=ignore_index)
    (want,) = torch.autograd.grad(want_loss, ref_leaf, grad.double())
    scale = torch.logsumexp(ref_leaf.detach(), 1).abs() + 1
    assert ((loss.double() - want_loss.detach()).abs() <= 1e-5 * scale).all()
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}[logits.dtype]
    assert ((got.double() - want).abs() <= tol * want.abs() + tol * want.abs().max()).all()


@pytest.mark.gpu_memory
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", [(8192, 32000), (1024, 128256), (256, 262144)], ids=str)
def test_benchmark_shapes(shape, dtype):
    logits = random(shape, dtype, "cuda") * 2
    labels = torch.randint(0, shape[1], (shape[0],), device="cuda")
    labels[::7] = -100
    check(logits, labels)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("classes", [1, 7, 8, 9, 33, 1000, 4099])
def test_rows_at_every_offset(classes, dtype):
    """Row starts at every element offset from a 16-byte boundary: head, vectors, tail."""
    base = random((5 * classes + 16,), dtype, "cuda")
    labels = torch.arange(5, device="cuda") * 3 % classes
    for offset in range(8):
        check(base[offset : offset + 5 * classes].view(5, classes), labels)


def test_gradient_rows_aligned_unlike_the_logits():
    """Logits at an odd offset in a contiguous view: grad_x (new memory) is aligned otherwise."""
    base = random((4 * 64 + 1,), torch.float32, "cuda")
    check(base[1:].view(4, 64), torch.tensor([0, 63, 5, -100], device="cuda"))


def test_out_of_range_label_gives_nan_without_synchronizing():
    logits = random((4, 10), torch.float32, "cuda").requires_grad_()
    labels = torch.tensor([0, 10, -5, -100], device="cuda")
    loss = custom_op.cross_entropy(logits, labels)
    (grad,) = torch.autograd.grad(loss.sum(), logits)
    torch.cuda.synchronize()  # and the context is still usable
    assert loss[0].isfinite() and loss[1:3].isnan().all() and loss[3] == 0
    assert grad[0].isfinite().all() and grad[1:3].isnan().all() and (grad[3] == 0).all()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.multi_gpu
def test_second_device():
    logits = random((6, 100), torch.float32, "cuda:1")
    labels = torch.randint(0, 100, (6,), device="cuda:1")
    out = custom_op.cross_entropy(logits, labels)
    assert out.device == logits.device
    torch.testing.assert_close(out.cpu(), custom_op.cross_entropy(logits.cpu(), labels.cpu()))
