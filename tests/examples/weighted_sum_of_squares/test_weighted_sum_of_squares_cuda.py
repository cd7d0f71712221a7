"""weighted_sum_of_squares on CUDA: every kernel shape (group, block, split rows, compiled row
lengths), streams, CUDA graphs, other devices, 64-bit indexing, large shapes."""

from __future__ import annotations

import pytest
import torch

import custom_op
from custom_op.testing import RTOL, random

HAS_CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")]


def gpu_memory_gb() -> float:
    return torch.cuda.get_device_properties(0).total_memory / 2**30 if HAS_CUDA else 0.0


# float64 references of tensors up to this size are computed on the CPU, larger ones on the GPU
# (fast for the benchmark-sized shapes). compute-sanitizer's initcheck, which `nox -s sanitize`
# runs over the small ones, reports reads inside ATen's float64 CUDA sums of these tests' sizes;
# on the CPU no kernel of the reference runs.
CPU_REFERENCE_NUMEL = 2**23


def reference_device(x: torch.Tensor) -> torch.device:
    return torch.device("cpu") if x.numel() <= CPU_REFERENCE_NUMEL else x.device


def check_on_device(out, x, w):
    """out against a float64 reference, relative to the size of the terms."""
    dev = reference_device(x)
    xd, wd = x.double().to(dev), w.double().to(dev)
    terms = wd * xd * xd
    ref, scale = terms.sum(-1), terms.abs().sum(-1)
    assert ((out.double().to(dev) - ref).abs() <= RTOL[x.dtype] * scale + 1e-30).all()


@pytest.mark.gpu_memory
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(1048576, 128), (65536, 1024), (8192, 4096), (4096, 65536), (3, 2**22)], ids=str)
def test_benchmark_shapes(shape, dtype):
    check_forward(shape, dtype)


def check_forward(shape, dtype):
    x = random(shape, dtype, "cuda")
    for w in (random(shape[-1:], dtype, "cuda"), random(shape, dtype, "cuda")):
        check_on_device(custom_op.weighted_sum_of_squares(x, w), x, w)


@pytest.mark.gpu_memory
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(1048576, 128), (8192, 4096), (3, 2**22)], ids=str)
def test_benchmark_shapes_backward(shape, dtype):
    check_backward(shape, dtype)


def check_backward(shape, dtype):
    """The gradients, with a 1-D w and with w like x, against float64. Large shapes make every
    grid-stride loop wrap, so the kernels' row and column counters take many steps."""
    x = random(shape, dtype, "cuda").requires_grad_()
    for w_shape in (shape[-1:], shape):
        w = random(w_shape, dtype, "cuda").requires_grad_()
        out = custom_op.weighted_sum_of_squares(x, w)
        grad = random(out.shape, dtype, "cuda")
        gx, gw = torch.autograd.grad(out, (x, w), grad)
        dev = reference_device(x)
        gx, gw, grad = gx.to(dev), gw.to(dev), grad.to(dev)
        g = grad.double().unsqueeze(-1)
        xd, wd = x.detach().double().to(dev), w.detach().double().to(dev)
        ref_gx = 2 * wd * xd * g
        terms = (xd * xd * g).expand(shape)
        ref_gw, scale_gw = terms.sum_to_size(w_shape), terms.abs().sum_to_size(w_shape)
        assert ((gx.double() - ref_gx).abs() <= 2 * RTOL[dtype] * ref_gx.abs() + 1e-30).all()
        assert ((gw.double() - ref_gw).abs() <= 2 * RTOL[dtype] * scale_gw + 1e-30).all()


# Enough rows (over half the H200's 8448 warp slots) that long rows get a warp each, with and
# without 16-byte vectors; and many short rows, whose backward spreads rows over the grid. fp16
# loads four steps at a time in the group kernel: 1001 columns leave up to three steps over.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", [(4500, 1001), (4500, 1024), (70001, 24)], ids=str)
def test_many_rows_forward_and_backward(shape, dtype):
    check_forward(shape, dtype)
    check_backward(shape, dtype)


# The row lengths compiled in besides 1024 and 65536 (fp32 2048, 8192, 16384), with the rows of
# two waves of blocks that the compiled kernel needs (2112 on an H200's 132 multiprocessors, 4500
# covering up to 281); fp16 takes the general kernels there.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("shape", [(4500, 2048), (4500, 8192), (4500, 16384)], ids=str)
def test_compiled_row_lengths(shape, dtype):
    check_forward(shape, dtype)


def test_side_stream():
    # The op must run on the current (side) stream: x is only written there, after a delay.
    src = random((4096, 1024), torch.float32, "cuda")
    w = random((1024,), torch.float32, "cuda")
    x = torch.zeros_like(src)
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)
        x.copy_(src)
        s = custom_op.weighted_sum_of_squares(x, w)
    stream.synchronize()
    torch.testing.assert_close(s, (w * src * src).sum(-1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [(512, 128), (4, 300000)], ids=str)
def test_cuda_graph_capture_and_replay(shape):
    x = random(shape, torch.float32, "cuda").requires_grad_()
    w = random(shape[-1:], torch.float32, "cuda").requires_grad_()
    # Warm up on a side stream, as torch.cuda.graphs requires.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        custom_op.weighted_sum_of_squares(x, w).sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    x.grad = w.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        s = custom_op.weighted_sum_of_squares(x, w)
        gx, gw = torch.autograd.grad(s.sum(), (x, w))
    for _ in range(3):
        with torch.no_grad():
            x.copy_(random(shape, torch.float32, "cuda"))
            w.copy_(random(shape[-1:], torch.float32, "cuda"))
        graph.replay()
        torch.cuda.synchronize()
        xd, wd = x.detach(), w.detach()
        torch.testing.assert_close(s, (wd * xd * xd).sum(-1), rtol=1e-5, atol=1e-3)
        torch.testing.assert_close(gx, 2 * wd * xd)
        torch.testing.assert_close(gw, (xd * xd).sum(0), rtol=1e-5, atol=1e-2)


@pytest.mark.multi_gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_second_device():
    torch.cuda.set_device(0)
    x = random((1000, 256), torch.float32, "cuda:1").requires_grad_()
    w = random((256,), torch.float32, "cuda:1").requires_grad_()
    s = custom_op.weighted_sum_of_squares(x, w)
    assert s.device == torch.device("cuda:1")
    torch.testing.assert_close(s, (w * x * x).sum(-1), rtol=1e-5, atol=1e-4)
    s.sum().backward()
    torch.testing.assert_close(x.grad, (2 * w * x).detach())
    assert torch.cuda.current_device() == 0


@pytest.mark.large
@pytest.mark.skipif(gpu_memory_gb() < 60, reason="needs a GPU with 60 GB")
def test_more_than_2_31_elements():
    rows, cols = 2**16 + 3, 2**15  # 2^31 + 98304 elements
    x = torch.randn(rows, cols, dtype=torch.float16, device="cuda")
    w = torch.randn(cols, dtype=torch.float16, device="cuda")
    s = custom_op.weighted_sum_of_squares(x, w)
    for r0 in range(0, rows, 8192):  # compare in chunks: the reference is float32
        xs = x[r0 : r0 + 8192].float()
        ref = w.float() * xs * xs
        torch.testing.assert_close(s[r0 : r0 + 8192].float(), ref.sum(-1), rtol=2e-3, atol=1.0)
    # Backward over all 2^31+ elements: the last row's gradients must be written too.
    # (a small incoming gradient keeps the summed fp16 weight gradient finite)
    g = torch.full((rows,), 2.0**-10, dtype=torch.float16, device="cuda")
    gx, gw = torch.ops.custom_op.weighted_sum_of_squares_backward(g, x, w)
    torch.testing.assert_close(gx[-1], (2 * w * x[-1] * 2.0**-10).half(), rtol=1e-3, atol=1e-5)
    ref_gw = torch.zeros(cols, dtype=torch.float32, device="cuda")
    for r0 in range(0, rows, 8192):
        ref_gw += (x[r0 : r0 + 8192].float() ** 2).sum(0) * 2.0**-10
    torch.testing.assert_close(gw.float(), ref_gw, rtol=2e-3, atol=1e-2)


# Shapes whose 1-D w backward spreads the rows over many blocks (dynamic chunks by default); the
# sanitizer runs skip the large one.
@pytest.mark.gpu_memory
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "shape", [pytest.param((1048576, 128), id="large-1048576x128"), (70001, 24), (4500, 1001)], ids=str
)
def test_deterministic_mode_backward_is_bitwise_repeatable(shape, dtype, deterministic_algorithms):
    check_backward(shape, dtype)
    x = random(shape, dtype, "cuda").requires_grad_()
    w = random(shape[-1:], dtype, "cuda").requires_grad_()
    grad = random(shape[:-1], dtype, "cuda")
    runs = [torch.autograd.grad(custom_op.weighted_sum_of_squares(x, w), (x, w), grad) for _ in range(5)]
    for gx, gw in runs[1:]:
        assert torch.equal(gx, runs[0][0]) and torch.equal(gw, runs[0][1])
