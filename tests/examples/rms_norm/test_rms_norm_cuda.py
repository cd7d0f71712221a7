"""rms_norm on CUDA: every kernel path against torch.nn.functional.rms_norm in float64 (rows in
registers, rows read twice, the backward's long rows past shared memory, many short rows), the
same bits on every run, streams, CUDA graphs, other devices, more than 2^31 elements."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import custom_op
from custom_op.testing import random

HAS_CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
EPS = 1e-6
# An output's error: its rounding (one unit in the last place of the result) plus the float32 (or
# float64) sums' error, relative to the magnitude of the terms summed.
ROUNDING = {torch.float64: 2**-52, torch.float32: 2**-23, torch.float16: 2**-10, torch.bfloat16: 2**-7}
SUMS = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 1e-5, torch.bfloat16: 1e-5}


def gpu_memory_gb() -> float:
    return torch.cuda.get_device_properties(0).total_memory / 2**30 if HAS_CUDA else 0.0


# float64 references of tensors up to this size are computed on the CPU, larger ones on the GPU.
# compute-sanitizer's initcheck, which `nox -s sanitize` runs over the small ones, reports reads
# inside ATen's float64 CUDA kernels; on the CPU no kernel of the reference runs.
CPU_REFERENCE_NUMEL = 2**23


def reference_device(x: torch.Tensor) -> torch.device:
    return torch.device("cpu") if x.numel() <= CPU_REFERENCE_NUMEL else x.device


def assert_within(name, got, want, scale, dtype):
    """got within its rounding of the float64 `want`, plus the sums' error relative to `scale`."""
    bound = ROUNDING[dtype] * want.abs() + SUMS[dtype] * scale + 1e-30
    worst = ((got.double().to(want.device) - want).abs() / bound).max().item()
    assert worst <= 1.0, f"{name}: error {worst:.3g}x the tolerance for {dtype}"


def check(x, w, grad):
    """y, rstd, grad_x and grad_weight of x (rows x H), w and an incoming gradient against
    torch.nn.functional.rms_norm and its autograd in float64."""
    y, rstd = torch.ops.custom_op.rms_norm_forward(x, w, EPS)
    x_, w_ = x.detach().requires_grad_(), w.detach().requires_grad_()
    gx, gw = torch.autograd.grad(custom_op.rms_norm(x_, w_, EPS), (x_, w_), grad)
    dev, dtype, h = reference_device(x), x.dtype, x.shape[-1]
    xd, wd = (t.detach().to(dev, torch.float64).requires_grad_() for t in (x, w))
    gd = grad.to(dev, torch.float64)
    y_ref = F.rms_norm(xd, (h,), wd, EPS)
    gx_ref, gw_ref = torch.autograd.grad(y_ref, (xd, wd), gd)
    xd, wd, y_ref = xd.detach(), wd.detach(), y_ref.detach()
    r = torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS)
    assert_within("y", y, y_ref, y_ref.abs(), dtype)
    assert_within("rstd", rstd.unsqueeze(-1), r, r, torch.float64 if dtype == torch.float64 else torch.float32)
    # grad_x = r * g * w - x * r^3 / H * sum(g * w * x) and grad_weight = sum over rows of g * x * r:
    # the magnitudes of their terms.
    sum_gwx = (gd * wd * xd).abs().sum(-1, keepdim=True)
    assert_within("grad_x", gx, gx_ref, r * (gd * wd).abs() + xd.abs() * r**3 / h * sum_gwx, dtype)
    assert_within("grad_weight", gw, gw_ref, (gd * xd * r).abs().reshape(-1, h).sum(0), dtype)


def check_shape(shape, dtype):
    check(random(shape, dtype, "cuda"), random(shape[-1:], dtype, "cuda"), random(shape, dtype, "cuda"))


# Vectors are 16 bytes (4 float32, 8 bfloat16 or float16, 2 float64 elements) where H allows them,
# else single elements. The forward keeps up to 4 vectors a thread of 512 in registers (float32)
# or 8 (the others), the backward 2 (2-byte types) or 4; a longer row is read twice, and the
# backward's two-pass rows sum grad_weight in shared memory up to what it holds (about 58000
# float32 columns, 29000 float64), the rest in the block's partial row.
PATHS = [
    pytest.param((300000, 8), id="many-short-rows"),  # a warp a row; the forward's grid wraps over rows
    pytest.param((70001, 24), id="short-rows"),  # the backward's blocks take many rows each
    pytest.param((4500, 200), id="registers-1-or-2-vectors"),
    pytest.param((4500, 1001), id="registers-elements"),  # odd H: no vectors, rows start unaligned
    pytest.param((4500, 1024), id="registers-vectors"),
    pytest.param((2000, 8192), id="registers-4-or-8-vectors"),  # float64's backward reads twice
    pytest.param((1000, 16384), id="read-twice"),  # bfloat16 and float16's forward still in registers
    pytest.param((1000, 5001), id="read-twice-elements"),
    pytest.param((300, 32768), id="read-twice-half-registers"),  # 2-byte forward: 8 vectors; float64 past shared
    pytest.param((300, 65536), id="past-shared-memory"),
    pytest.param((300, 70001), id="past-shared-memory-elements"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", PATHS)
def test_every_kernel_path(shape, dtype):
    check_shape(shape, dtype)


@pytest.mark.gpu_memory
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(16384, 4096), (4096, 16384), (65536, 1024)], ids=str)
def test_benchmark_shapes(shape, dtype):
    check_shape(shape, dtype)


def test_one_value_grad_on_long_rows():
    """y.sum()'s gradient is one value broadcast (stride 0), read in place by both backward paths."""
    for shape in ((8, 1024), (8, 16384), (4, 70001)):
        x = random(shape, torch.bfloat16, "cuda")
        w = random(shape[-1:], torch.bfloat16, "cuda")
        check(x, w, torch.ones((), dtype=x.dtype, device="cuda").expand(shape))


def forward_and_backward(x, w, grad):
    y = custom_op.rms_norm(x, w, EPS)
    return (y, *torch.autograd.grad(y, (x, w), grad))


@pytest.mark.parametrize("mode", ["default", "deterministic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(70001, 24), (4500, 1024), (1000, 16384), (300, 65536)], ids=str)
def test_the_same_bits_on_every_run(shape, dtype, mode, request):
    """A fixed grid sums each block's rows in order and the blocks' sums in order: no atomics, so the
    gradients repeat bit for bit with or without torch.use_deterministic_algorithms."""
    if mode == "deterministic":
        request.getfixturevalue("deterministic_algorithms")
    x = random(shape, dtype, "cuda").requires_grad_()
    w = random(shape[-1:], dtype, "cuda").requires_grad_()
    grad = random(shape, dtype, "cuda")
    runs = [forward_and_backward(x, w, grad) for _ in range(4)]
    for run in runs[1:]:
        for got, want in zip(run, runs[0], strict=True):
            assert torch.equal(got, want)


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
        y = custom_op.rms_norm(x, w, EPS)
    stream.synchronize()
    torch.testing.assert_close(y, F.rms_norm(src, (1024,), w, EPS), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(512, 128), (64, 70001)], ids=str)
def test_cuda_graph_capture_and_replay(shape):
    """Forward and backward captured once (the two-pass backward's partial sums included) and
    replayed on new inputs."""
    x = random(shape, torch.float32, "cuda").requires_grad_()
    w = random(shape[-1:], torch.float32, "cuda").requires_grad_()
    grad = random(shape, torch.float32, "cuda")
    side = torch.cuda.Stream()  # warm up on a side stream, as torch.cuda.graphs requires
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        forward_and_backward(x, w, grad)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = forward_and_backward(x, w, grad)
    for _ in range(3):
        with torch.no_grad():
            x.copy_(random(shape, torch.float32, "cuda"))
            w.copy_(random(shape[-1:], torch.float32, "cuda"))
        graph.replay()
        torch.cuda.synchronize()
        for got, want in zip(captured, forward_and_backward(x, w, grad), strict=True):
            assert torch.equal(got, want)


@pytest.mark.multi_gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_second_device():
    torch.cuda.set_device(0)
    x = random((1000, 256), torch.float32, "cuda:1")
    w = random((256,), torch.float32, "cuda:1")
    y = custom_op.rms_norm(x, w, EPS)
    assert y.device == torch.device("cuda:1")
    check(x, w, random((1000, 256), torch.float32, "cuda:1"))
    assert torch.cuda.current_device() == 0


@pytest.mark.large
@pytest.mark.skipif(gpu_memory_gb() < 60, reason="needs a GPU with 60 GB")
@pytest.mark.parametrize("cols", [4096, 65536], ids=["registers", "read-twice"])
def test_more_than_2_31_elements_forward_and_backward(cols):
    """float16 rows past 2^31 elements in all: rows at the start, across element 2^31 and at the end
    match the reference, and grad_weight sums every row."""
    rows = 2**31 // cols + 3
    x = torch.randn(rows, cols, dtype=torch.float16, device="cuda")
    w = torch.randn(cols, dtype=torch.float16, device="cuda")
    grad = torch.randn(rows, cols, dtype=torch.float16, device="cuda")
    y, rstd = torch.ops.custom_op.rms_norm_forward(x, w, EPS)
    gx, gw = torch.ops.custom_op.rms_norm_backward(grad, x, w, rstd)
    for r0 in (0, 2**31 // cols - 1, rows - 2):  # two rows each
        piece = slice(r0, r0 + 2)
        xd = x[piece].double().requires_grad_()
        want = F.rms_norm(xd, (cols,), w.double(), EPS)
        (want_gx,) = torch.autograd.grad(want, (xd,), grad[piece].double())
        torch.testing.assert_close(y[piece].double(), want.detach(), rtol=2e-3, atol=1e-3)
        torch.testing.assert_close(gx[piece].double(), want_gx, rtol=2e-3, atol=1e-3)
    want_gw = torch.zeros(cols, dtype=torch.float64, device="cuda")
    scale = torch.zeros_like(want_gw)
    step = 2**25 // cols
    for r0 in range(0, rows, step):
        xs = x[r0 : r0 + step].double()
        terms = grad[r0 : r0 + step].double() * xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + EPS)
        want_gw += terms.sum(0)
        scale += terms.abs().sum(0)
    assert_within("grad_weight", gw, want_gw, scale, torch.float16)
