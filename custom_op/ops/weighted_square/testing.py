"""What the shared test suites and the benchmark need to know about weighted_square."""

from __future__ import annotations

import torch
from torch.distributed.tensor import Replicate, Shard

from ..._library import NAMESPACE
from ...testing import BadInput, BlockLayer, OpSpec, Sample, random, residual_training
from . import AUTOCAST_DTYPE, weighted_square

NAME = "weighted_square"

# Shapes reaching every kernel path: scalar tails (sizes not a multiple of 8), one and many vectors.
SHAPES = [(7,), (3, 5), (4, 33), (2, 3, 128), (257, 64), (2, 70001)]


def reference(x, w):
    return w * x * x


def baseline(x, w):
    """What PyTorch users would call instead: the benchmark's eager and torch.compile columns."""
    return w * x.square()


def samples(device: str, dtype: torch.dtype):
    """(x, w) of each shape, then inputs that are not contiguous, empty and 0-dim ones."""
    for shape in SHAPES:
        yield Sample((random(shape, dtype, device), random(shape, dtype, device)), "x".join(map(str, shape)))
    base = random((24, 40), dtype, device)
    yield Sample((base.t(), random((40, 24), dtype, device)), "transposed")
    yield Sample((base[:, 3:35], random((24, 32), dtype, device)), "sliced")
    yield Sample((base.flatten()[1:937].view(24, 39), random((24, 39), dtype, device)), "offset (unaligned)")
    yield Sample((random((1, 40), dtype, device).expand(5, 40), base[:5].t().t()), "expanded")
    for shape in [(0,), (3, 0)]:
        yield Sample((random(shape, dtype, device), random(shape, dtype, device)), f"empty {shape}")
    yield Sample((random((), dtype, device), random((), dtype, device)), "0-dim")


def bad_inputs(device: str):
    public = f"{NAMESPACE}::{NAME}"
    x, w = random((3, 4), torch.float32, device), random((3, 4), torch.float32, device)
    for bad in (torch.int64, torch.bool, torch.complex64):
        name = str(bad).removeprefix("torch.")
        expect = ("float32, float64, float16 or bfloat16", f"got {name}")
        yield BadInput((x.to(bad), w), (public, "argument 'x'", *expect), f"x {name}")
        yield BadInput((x, w.to(bad)), (public, "argument 'w'", *expect), f"w {name}")
    yield BadInput((x, w.double()), (public, "'x' and 'w'", "same dtype", "float32", "float64"), "dtype mismatch")
    yield BadInput((x, torch.empty(3, 4, device="meta")), (public, "same device"), "device mismatch")
    for w_shape in [(4,), (4, 3), ()]:
        given = "[" + ", ".join(map(str, w_shape)) + "]"
        yield BadInput(
            (x, random(w_shape, torch.float32, device)),
            (public, "argument 'w'", "the shape [3, 4]", f"got {given}"),
            f"w shape {w_shape}",
        )
    yield BadInput(([1.0, 2.0], w), (NAME,), "a list for x")


def make_sample(shape, dtype, device) -> Sample:
    return Sample((torch.randn(shape, device=device, dtype=dtype), torch.randn(shape, device=device, dtype=dtype)))


def bench_shapes(device: str, quick: bool) -> list[tuple]:
    if quick:
        return [(2**16,), (2**20,)]
    exponents = (16, 18, 20, 22, 24, 26, 27) if device == "cuda" else (16, 24)  # the CPU run: about a minute
    return [(2**k,) for k in exponents]


def bytes_moved(sample: Sample, backward: bool) -> int:
    x = sample.args[0]
    n, e = x.numel(), x.element_size()
    return e * (3 * n + (5 * n if backward else 0))  # x, w -> y; grad, x, w -> grad_x, grad_w


def placements(sample: Sample):
    """What the sharding rule serves (sharding.py): x and w replicated, or sharded over the same dimension."""
    yield (Replicate(), Replicate())
    for dim in range(sample.args[0].ndim):
        yield (Shard(dim), Shard(dim))


class GatedSquare(torch.nn.Module):
    """The benchmark's training layer: x**2 gated by sigmoid(x), through `function(x, gate)`."""

    def __init__(self, function) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x, torch.sigmoid(x))


def training(device: str, dtype: torch.dtype, quick: bool):
    """Residual blocks of the layer, through the op and through the baseline (same parameters)."""
    return residual_training(
        lambda features: (GatedSquare(weighted_square), GatedSquare(baseline)), device, dtype, quick
    )


SPEC = OpSpec(
    name=NAME,
    function=weighted_square,
    reference=reference,
    samples=samples,
    bad_inputs=bad_inputs,
    make_sample=make_sample,
    bench_shapes=bench_shapes,
    bytes_moved=bytes_moved,
    autocast_dtype=AUTOCAST_DTYPE,
    training=training,
    block=BlockLayer("activation", lambda op, h: op(h, torch.sigmoid(h))),  # the block's: h**2 gated by sigmoid(h)
    baseline=baseline,
    placements=placements,
)
