"""What each operator tells the shared test suites and the benchmark about itself (ops/<name>/testing.py).

The suites (tests/ops) and `python -m bench` iterate over every operator's SPEC: forward against
a float64 reference, gradients and gradcheck, opcheck, torch.compile(fullgraph=True), bad input,
CUDA streams and graphs, the benchmark against eager and torch.compile with the bytes it moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

# Relative tolerance against a float64 reference, relative to the magnitude of the result (or of
# the terms a reduction sums): output rounding plus accumulation error.
RTOL = {torch.float64: 1e-12, torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def random(shape, dtype, device, generator=None) -> torch.Tensor:
    """Fresh random values away from zero (zeros hide unwritten outputs)."""
    t = torch.randn(shape, dtype=torch.float64, generator=generator)
    t = t + torch.sign(t) * 0.1
    return t.to(device=device, dtype=dtype)


@dataclass(frozen=True)
class Sample:
    """One call: the public function's positional arguments (tensors and scalars), and a label."""

    args: tuple
    label: str = ""
    kwargs: dict = field(default_factory=dict)

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [a for a in self.args if isinstance(a, torch.Tensor)]

    def detached(self, dtype=None, requires_grad=False) -> Sample:
        """The same call on fresh leaves (optionally cast), requiring grad where floating."""

        def leaf(a):
            if not isinstance(a, torch.Tensor):
                return a
            t = a.detach().to(dtype or a.dtype)
            return t.requires_grad_(requires_grad and t.is_floating_point())

        return Sample(tuple(leaf(a) for a in self.args), self.label, self.kwargs)


@dataclass(frozen=True)
class BadInput:
    """A call that must raise, and the pieces its message must contain."""

    args: tuple
    fragments: tuple[str, ...]
    label: str


@dataclass(frozen=True)
class OpSpec:
    name: str  # the op's name in the library: torch.ops.<namespace>.<name>
    function: Callable  # the public function, custom_op.<name>
    reference: Callable  # the same math in eager PyTorch; run on float64 inputs, it is the reference
    samples: Callable[[str, torch.dtype], Iterable[Sample]]  # (device, dtype): every kernel path
    bad_inputs: Callable[[str], Iterable[BadInput]]  # (device)
    make_sample: Callable[[tuple, torch.dtype, str], Sample]  # (shape, dtype, device): inputs of that size
    bench_shapes: Callable[[str, bool], list[tuple]]  # (device, quick): the benchmark's sizes
    bytes_moved: Callable[[Sample, bool], int]  # (sample, with backward): bytes that must move
    # The magnitude an output's error is relative to, from float64 inputs (default: |reference|);
    # a reduction passes the sum of its terms' magnitudes.
    scale: Callable | None = None
    rtol: dict = field(default_factory=lambda: dict(RTOL))
    # Small float64 samples for gradcheck (default: the float64 samples with at most 64 elements).
    gradcheck_samples: Callable[[str], Iterable[Sample]] | None = None
    # Other ways to call the op that the benchmark times too: {label: callable of the same args}.
    bench_variants: Callable[[Sample], dict] | None = None

    def overload(self, namespace: str):
        return getattr(getattr(torch.ops, namespace), self.name).default

    def small_float64_samples(self, device: str) -> list[Sample]:
        if self.gradcheck_samples is not None:
            return list(self.gradcheck_samples(device))
        return [s for s in self.samples(device, torch.float64) if all(t.numel() <= 64 for t in s.tensors)]

    def check(self, out: torch.Tensor, sample: Sample) -> None:
        """out against the float64 reference of the same call, on the CPU."""
        inputs = [a.detach().double().cpu() if isinstance(a, torch.Tensor) else a for a in sample.args]
        ref = self.reference(*inputs, **sample.kwargs)
        scale = (self.scale or (lambda *a, **k: ref.abs()))(*inputs, **sample.kwargs)
        dtype = sample.tensors[0].dtype
        assert out.dtype == dtype, f"{sample.label}: dtype {out.dtype}, expected {dtype}"
        assert out.device == sample.tensors[0].device, sample.label
        assert out.shape == ref.shape, f"{sample.label}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
        if out.numel() == 0:
            return
        assert torch.isfinite(ref).all(), f"{sample.label}: the float64 reference is not finite (fix the reference)"
        assert torch.isfinite(out).all(), f"{sample.label}: non-finite output"
        finfo = torch.finfo(dtype)
        # plus the spacing of subnormals: a result that underflows is rounded on an absolute grid
        bound = self.rtol[dtype] * scale + finfo.tiny * finfo.eps
        worst = ((out.double().cpu() - ref).abs() / bound).max().item()
        assert worst <= 1.0, f"{sample.label}: error {worst:.3g}x the tolerance for {dtype}"
