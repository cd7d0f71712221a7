"""What the shared test suites and the benchmark need to know about rms_norm."""

from __future__ import annotations

import importlib.util

import torch
from torch.distributed.tensor import Replicate, Shard

from ..._library import NAMESPACE
from ...testing import RTOL, BadInput, BlockLayer, OpSpec, Sample, random, residual_training
from . import rms_norm

NAME = "rms_norm"
EPS = 1e-6

# Rows of every length the kernels treat differently: odd (no vector loads), one vector, rows that
# fit a block's registers, rows longer than that, and many short rows.
SHAPES = [(2,), (7,), (3, 5), (4, 33), (2, 3, 128), (257, 64), (8, 4096), (3, 16384), (2, 70001), (2, 65536)]


def reference(x, weight, eps):
    """RMSNorm in eager PyTorch, as models write it (half types computed in float32); run on float64
    inputs, the tests' reference."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.to(y.dtype)).to(x.dtype)


def baseline(x, weight, eps):
    """What PyTorch users call instead: the benchmark's eager and torch.compile columns."""
    return torch.nn.functional.rms_norm(x, x.shape[-1:], weight, eps)


def liger(device: str) -> dict:
    """Liger-Kernel's RMSNorm (Triton, CUDA) where it is installed, with its defaults (its backward
    writes grad_x over the incoming gradient)."""
    if device != "cuda" or importlib.util.find_spec("liger_kernel") is None:
        return {}
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    return {"Liger-Kernel": lambda x, weight, eps: LigerRMSNormFunction.apply(x, weight, eps)}


def samples(device: str, dtype: torch.dtype):
    """Every kernel path: row lengths, inputs that are not contiguous, magnitudes, empty inputs."""
    for shape in SHAPES:
        yield Sample((random(shape, dtype, device), random(shape[-1:], dtype, device), EPS), "x".join(map(str, shape)))
    base = random((24, 40), dtype, device)
    yield Sample((base.t(), random((24,), dtype, device), EPS), "transposed")
    yield Sample((base[:, 3:35], random((32,), dtype, device), EPS), "sliced")
    yield Sample((base.flatten()[1:937].view(24, 39), random((39,), dtype, device), EPS), "offset (unaligned)")
    yield Sample((base, random((80,), dtype, device)[::2], EPS), "weight stepped")
    yield Sample((random((1, 40), dtype, device).expand(5, 40), random((40,), dtype, device), EPS), "expanded")
    # Squares past float16's range: the sum must be taken in float32.
    yield Sample((random((4, 256), dtype, device) * 300, random((256,), dtype, device), EPS), "large magnitudes")
    yield Sample((random((4, 64), dtype, device), random((64,), dtype, device), 0.5), "large eps")
    yield Sample((random((0, 8), dtype, device), random((8,), dtype, device), EPS), "empty rows")
    yield Sample((random((3, 0), dtype, device), random((0,), dtype, device), EPS), "empty row")


def gradcheck_samples(device: str):
    for shape in [(4,), (3, 5), (2, 3, 4)]:
        x, weight = random(shape, torch.float64, device), random(shape[-1:], torch.float64, device)
        yield Sample((x, weight, EPS), "x".join(map(str, shape)))


def bad_inputs(device: str):
    public = f"{NAMESPACE}::{NAME}"
    x, weight = random((3, 4), torch.float32, device), random((4,), torch.float32, device)
    for bad in (torch.int32, torch.int64, torch.bool, torch.complex64):
        name = str(bad).removeprefix("torch.")
        expect = ("float32, float64, float16 or bfloat16", f"got {name}")
        yield BadInput((x.to(bad), weight, EPS), (public, "argument 'x'", *expect), f"x {name}")
        yield BadInput((x, weight.to(bad), EPS), (public, "argument 'weight'", *expect), f"weight {name}")
    yield BadInput((x, weight.double(), EPS), (public, "same dtype", "float32", "float64"), "dtype mismatch")
    yield BadInput((x, torch.empty(4, device="meta"), EPS), (public, "same device"), "device mismatch")
    for x_shape, w_shape in [((3, 4), (3,)), ((3, 4), (3, 4)), ((2, 3, 4), (1, 4)), ((3, 4), ())]:
        given = "[" + ", ".join(map(str, w_shape)) + "]"
        yield BadInput(
            (random(x_shape, torch.float32, device), random(w_shape, torch.float32, device), EPS),
            (public, "argument 'weight'", f"shape [{x_shape[-1]}]", f"got shape {given}", str(list(x_shape))),
            f"weight shape {w_shape} for x {x_shape}",
        )
    yield BadInput(
        (random((), torch.float32, device), random((1,), torch.float32, device), EPS),
        (public, "argument 'x'", "at least 1 dimension", "0-dim"),
        "0-dim x",
    )
    for eps in (-1.0, -0.1234567, float("nan"), float("inf")):
        yield BadInput((x, weight, eps), (public, "argument 'eps'", ">= 0"), f"eps {eps}")
    yield BadInput((x, weight, "small"), (public, "argument 'eps'", "got str"), "a string for eps")
    yield BadInput(([1.0, 2.0], weight, EPS), (NAME,), "a list for x")


def make_sample(shape, dtype, device) -> Sample:
    """x of `shape` and a weight of one element per feature."""
    x = torch.randn(shape, device=device, dtype=dtype)
    return Sample((x, torch.randn(shape[-1:], device=device, dtype=dtype), EPS))


def bench_shapes(device: str, quick: bool) -> list[tuple]:
    if quick:
        return [(1024, 1024)]
    if device == "cuda":
        return [(16384, 4096), (4096, 16384), (65536, 1024)]
    return [(4096, 1024), (256, 16384)]


def bytes_moved(sample: Sample, backward: bool) -> int:
    """Forward: x and weight in, y and rstd out. Backward: grad, x, weight and rstd in, grad_x and
    grad_weight out."""
    x = sample.args[0]
    n, h, e = x.numel(), x.shape[-1], x.element_size()
    rows, rstd = n // max(h, 1), 8 if x.dtype == torch.float64 else 4
    forward = e * (2 * n + h) + rows * rstd
    return forward + (e * (3 * n + 2 * h) + rows * rstd if backward else 0)


def placements(sample: Sample):
    """What the sharding rule serves (sharding.py): rows sharded over any dimension but the last
    (batch, sequence), weight replicated; or all replicated."""
    x = sample.args[0]
    yield (Replicate(), Replicate(), None)
    for dim in range(x.ndim - 1):
        yield (Shard(dim), Replicate(), None)


class RMSNorm(torch.nn.Module):
    """The benchmark's training step: the op as a model's normalization layer."""

    def __init__(self, features: int, function) -> None:
        super().__init__()
        self.function = function
        self.weight = torch.nn.Parameter(torch.ones(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x, self.weight, EPS)


def training(device: str, dtype: torch.dtype, quick: bool):
    """Residual blocks normalized by the op, and by the baseline (the same parameters)."""
    return residual_training(
        lambda features: (RMSNorm(features, rms_norm), RMSNorm(features, baseline)), device, dtype, quick
    )


SPEC = OpSpec(
    name=NAME,
    function=rms_norm,
    reference=reference,
    samples=samples,
    bad_inputs=bad_inputs,
    make_sample=make_sample,
    bench_shapes=bench_shapes,
    bytes_moved=bytes_moved,
    gradcheck_samples=gradcheck_samples,
    kind="rowwise",
    extra_ops=(f"{NAME}_forward",),  # returns (y, rstd): rstd is saved for the backward
    # A row's sum of squares in float32: float32 outputs carry its rounding over long rows.
    rtol={**RTOL, torch.float32: 1e-5},
    autocast_dtype=torch.float32,  # AUTOCAST_DEVICES in __init__.py
    baseline=baseline,
    other_libraries=liger,
    training=training,
    block=BlockLayer("norm", lambda op, x, weight: op(x, weight, EPS)),  # the block's norms
    placements=placements,
)
