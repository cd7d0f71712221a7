"""What the shared test suites and the benchmark need to know about weighted_sum_of_squares."""

from __future__ import annotations

import torch

from ..._library import NAMESPACE
from ...testing import BadInput, OpSpec, Sample, random
from ..weighted_square.testing import FORMS, weight_shape, weighted_bad_inputs, weighted_samples
from ..weighted_square.weights import AUTOCAST_DTYPE
from . import weighted_sum_of_squares

NAME = "weighted_sum_of_squares"


def reference(x, w):
    return (w * x * x).sum(-1)


def scale(x, w):
    """A sum that nearly cancels has no relative bound: the error is relative to its terms' size."""
    return (w * x * x).abs().sum(-1)


def samples(device: str, dtype: torch.dtype):
    return weighted_samples(device, dtype)


def gradcheck_samples(device: str):
    for shape in [(4,), (3, 5), (2, 3, 4)]:
        for form in FORMS:
            x, w = random(shape, torch.float64, device), random(weight_shape(shape, form), torch.float64, device)
            yield Sample((x, w), f"{shape} {form}")


def bad_inputs(device: str):
    yield from weighted_bad_inputs(NAME, device)
    yield BadInput(
        (random((), torch.float32, device), random((), torch.float32, device)),
        (f"{NAMESPACE}::{NAME}", "argument 'x'", "at least 1 dimension", "0-dim"),
        "0-dim x",
    )


def make_sample(shape, dtype, device) -> Sample:
    """x of `shape` and a 1-D w, one weight per feature, as RMSNorm has."""
    return Sample((torch.randn(shape, device=device, dtype=dtype), torch.randn(shape[-1:], device=device, dtype=dtype)))


def bench_shapes(device: str, quick: bool) -> list[tuple]:
    if quick:
        return [(4096, 256)]
    if device == "cuda":
        return [(1048576, 128), (65536, 1024), (8192, 4096), (4096, 65536)]
    return [(131072, 128), (16384, 1024), (4096, 4096), (256, 65536)]


def bytes_moved(sample: Sample, backward: bool) -> int:
    x = sample.args[0]
    n, d, e = x.numel(), x.shape[-1], x.element_size()
    rows = n // d
    forward = n + d + rows  # x, a 1-D w -> one sum per row
    return e * (forward + (rows + n + d + n + d if backward else 0))  # grad, x, w -> grad_x, grad_w


class Norm(torch.nn.Module):
    """The benchmark's training step: RMSNorm with the mean of squares taken by the op
    (w = 1/features), x * rsqrt(mean + eps) * gain."""

    def __init__(self, features: int, function) -> None:
        super().__init__()
        self.function = function
        self.register_buffer("mean_weight", torch.full((features,), 1.0 / features))
        self.gain = torch.nn.Parameter(torch.ones(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(self.function(x, self.mean_weight) + 1e-6).unsqueeze(-1) * self.gain


def training_layers(features: int) -> tuple[Norm, Norm]:
    return Norm(features, weighted_sum_of_squares), Norm(features, reference)


SPEC = OpSpec(
    name=NAME,
    function=weighted_sum_of_squares,
    reference=reference,
    scale=scale,
    samples=samples,
    bad_inputs=bad_inputs,
    make_sample=make_sample,
    bench_shapes=bench_shapes,
    bytes_moved=bytes_moved,
    gradcheck_samples=gradcheck_samples,
    kind="rowwise",  # one sum per row of the last dimension
    autocast_dtype=AUTOCAST_DTYPE,
    training_layers=training_layers,
)
