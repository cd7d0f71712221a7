"""What the shared test suites and the benchmark need to know about weighted_square."""

from __future__ import annotations

import torch
from torch.distributed.tensor import Replicate, Shard

from ..._library import NAMESPACE
from ...testing import BadInput, OpSpec, Sample, random, residual_training
from . import AUTOCAST_DTYPE, weighted_square, weighted_square_

NAME = "weighted_square"

# Shapes reaching every kernel path: odd sizes (scalar tails), short and long rows, many rows.
SHAPES = [(7,), (3, 5), (4, 33), (2, 3, 128), (257, 64), (64, 1024), (8, 4096), (2, 70001), (1, 300000)]
FORMS = ("full", "per_feature")


def weight_shape(x_shape, form: str) -> tuple:
    return tuple(x_shape) if form == "full" else tuple(x_shape[-1:])


def reference(x, w):
    return w * x * x


def baseline(x, w):
    """What PyTorch users would call instead: the benchmark's eager and torch.compile columns."""
    return w * x.square()


def weighted_samples(device: str, dtype: torch.dtype, shapes=SHAPES):
    """(x, w) for each shape and weight form, then inputs that are not contiguous and empty ones."""
    for shape in shapes:
        for form in FORMS:
            yield Sample((random(shape, dtype, device), random(weight_shape(shape, form), dtype, device)),
                         f"{'x'.join(map(str, shape))} {form}")  # fmt: skip
    base = random((24, 40), dtype, device)
    yield Sample((base.t(), random((24,), dtype, device)), "transposed")
    yield Sample((base[:, 3:35], random((32,), dtype, device)), "sliced")
    yield Sample((base[::3, ::2], random((20,), dtype, device)), "stepped")
    yield Sample((base.flatten()[1:937].view(24, 39), random((39,), dtype, device)), "offset (unaligned)")
    yield Sample((base, random((80,), dtype, device)[::2]), "weight stepped")
    yield Sample((random((1, 40), dtype, device).expand(5, 40), random((40,), dtype, device)), "expanded")
    yield Sample((base.t(), random((24, 40), dtype, device).t()), "full weight transposed")
    for shape in [(0,), (0, 8), (3, 0), (2, 0, 4)]:
        yield Sample((random(shape, dtype, device), random(shape[-1:], dtype, device)), f"empty {shape}")


def samples(device: str, dtype: torch.dtype):
    yield from weighted_samples(device, dtype)
    yield Sample((random((), dtype, device), random((), dtype, device)), "0-dim")


def gradcheck_samples(device: str):
    for shape in [(4,), (3, 5), (2, 3, 4)]:
        for form in FORMS:
            x, w = random(shape, torch.float64, device), random(weight_shape(shape, form), torch.float64, device)
            yield Sample((x, w), f"{shape} {form}")
    yield Sample((random((), torch.float64, device), random((), torch.float64, device)), "0-dim")


def bad_inputs(device: str):
    public = f"{NAMESPACE}::{NAME}"
    x, w = random((3, 4), torch.float32, device), random((4,), torch.float32, device)
    for bad in (torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64):
        name = str(bad).removeprefix("torch.")
        expect = ("float32, float64, float16 or bfloat16", f"got {name}")
        yield BadInput((x.to(bad), w), (public, "argument 'x'", *expect), f"x {name}")
        yield BadInput((x, w.to(bad)), (public, "argument 'w'", *expect), f"w {name}")
    yield BadInput((x, w.double()), (public, "'x' and 'w'", "same dtype", "float32", "float64"), "dtype mismatch")
    yield BadInput((x, torch.empty(4, device="meta")), (public, "same device"), "device mismatch")
    for x_shape, w_shape in [((3, 4), (3,)), ((3, 4), (4, 3)), ((2, 3, 4), (3, 4)), ((3, 4), ())]:
        given = "[" + ", ".join(map(str, w_shape)) + "]"
        yield BadInput(
            (random(x_shape, torch.float32, device), random(w_shape, torch.float32, device)),
            (public, "argument 'w'", f"x.shape[-1] = {x_shape[-1]}", f"got shape {given}"),
            f"w shape {w_shape} for x {x_shape}",
        )
    yield BadInput(([1.0, 2.0], w), (NAME,), "a list for x")


def make_sample(shape, dtype, device) -> Sample:
    return Sample((torch.randn(shape, device=device, dtype=dtype), torch.randn(shape, device=device, dtype=dtype)))


def bench_shapes(device: str, quick: bool) -> list[tuple]:
    if quick:
        return [(2**16,), (2**20,)]
    exponents = (16, 18, 20, 22, 24, 26, 27) if device == "cuda" else (16, 20, 24)
    return [(2**k,) for k in exponents]


def bytes_moved(sample: Sample, backward: bool) -> int:
    x = sample.args[0]
    n, e = x.numel(), x.element_size()
    return e * (3 * n + (5 * n if backward else 0))  # x, w -> y; grad, x, w -> grad_x, grad_w


def bench_variants(sample: Sample) -> dict:
    """The same op writing into given memory: out= and in place (w = 1/x keeps x the same)."""
    x = sample.args[0]
    out, inverse = torch.empty_like(x), x.reciprocal()
    return {
        "custom_op out=": lambda x, w: weighted_square(x, w, out=out),
        "custom_op in place": lambda x, w: weighted_square_(x, inverse),
    }


def placements(sample: Sample):
    """What the sharding rule serves (sharding.py): x and w replicated, or sharded over the same
    dimension; a weight per feature sharded with x's last dimension, replicated for the others."""
    x, w = sample.args
    yield (Replicate(), Replicate())
    for dim in range(x.ndim):
        if w.shape == x.shape:
            yield (Shard(dim), Shard(dim))
        else:
            yield (Shard(dim), Shard(0) if dim == x.ndim - 1 else Replicate())


class Layer(torch.nn.Module):
    """The benchmark's training step: y = w * x**2 with one learned weight per feature."""

    def __init__(self, features: int, function) -> None:
        super().__init__()
        self.function = function
        self.weight = torch.nn.Parameter(torch.full((features,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x, self.weight)


def training(device: str, dtype: torch.dtype, quick: bool):
    """Residual blocks of the layer, through the op and through the baseline (same parameters)."""
    return residual_training(
        lambda features: (Layer(features, weighted_square), Layer(features, baseline)), device, dtype, quick
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
    gradcheck_samples=gradcheck_samples,
    bench_variants=bench_variants,
    autocast_dtype=AUTOCAST_DTYPE,
    training=training,
    baseline=baseline,
    placements=placements,
)
