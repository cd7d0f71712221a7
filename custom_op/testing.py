"""What each operator tells the shared test suites and the benchmark about itself (ops/<name>/testing.py).

The suites (tests/ops) and `python -m bench` iterate over every operator's SPEC, and each sample is
a test of its own (`pytest tests/ops -k "rms_norm and 3x5"` runs one). The contract, what every
suite assumes unless the spec says otherwise:

- `function(*sample.args, **sample.kwargs)` is the public call; it returns one tensor, new and
  contiguous, with the first tensor's dtype and device. `reference` is the same math in eager
  PyTorch: on float64 inputs it is the float64 reference the outputs are checked against; its
  autograd gives the reference gradients.
- torch.ops.<namespace>.<name> takes the same arguments and returns the same (forward, opcheck,
  torch.fx). An op whose registered result is more than the function's (several outputs, a
  tensor saved for backward) gives `op_output` to pick the function's result from it, or keeps the
  saved tensors in another op that the function calls and names it in `extra_ops` (opcheck runs
  each with the same samples, grad-requiring, so that their autograd registration is checked).
- `kind` says how outputs depend on inputs: "elementwise" (each output element from the same
  elements) or "rowwise" (each row of the last dimension from the same row: normalizations,
  reductions). It chooses the largest test's shape (`large_shape`, past 2^31 elements on a GPU)
  and how that test slices inputs to check pieces of the output.
- `samples(device, dtype)` reaches every kernel path (odd sizes, views, empty, 0-dim where the op
  allows it), with labels unique within the op: each label is a test id. `bad_inputs(device)`
  gives calls that must raise, with message fragments; each label is a test id too.
- `autocast_dtype` is the op's autocast rule (None: none).
- The benchmark times `function` against `baseline` (what PyTorch users would call instead, not
  the test reference) eager and compiled; an op without one is timed alone and reported as such.
  Given `training_layers`, it times a training step of a small model made of the op's layers
  against the same model through the baseline.
- Every floating tensor argument is differentiable (gradcheck, compile forward+backward, CUDA
  graph replay of the backward); other arguments are passed through unchanged.
"""

from __future__ import annotations

import re
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
    def id(self) -> str:
        """The label as a test id that `pytest -k` can select: letters, digits, '.', '_'."""
        return id_of(self.label)

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


def id_of(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", label).strip("_") or "default"


@dataclass(frozen=True)
class BadInput:
    """A call that must raise, and the pieces its message must contain."""

    args: tuple
    fragments: tuple[str, ...]
    label: str

    @property
    def id(self) -> str:
        return id_of(self.label)


KINDS = ("elementwise", "rowwise")
# The largest test's shape by kind: past 2^31 elements, with a tail that is not a multiple of 4096.
LARGE_SHAPES = {"elementwise": (2**31 + 4099,), "rowwise": (2**31 // 4096 + 3, 4096)}


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
    kind: str = "elementwise"  # or "rowwise"; see the module's docstring
    # The shape of the first input in the test past 2^31 elements (default: LARGE_SHAPES[kind]).
    large_shape: tuple | None = None
    # The function's result from the registered op's (default: the same), e.g. lambda r: r[0].
    op_output: Callable | None = None
    # Other registered ops of this op that take the function's arguments (opcheck runs them too).
    extra_ops: tuple[str, ...] = ()
    # What PyTorch users would call instead (same arguments): the benchmark's eager and
    # torch.compile columns time it; None: the op is timed alone, reported as having no baseline.
    baseline: Callable | None = None
    # The op as a layer of the benchmark's training step: features -> (a module through the op,
    # the same module through the baseline, parameters alike); None: not in the training step.
    training_layers: Callable[[int], tuple] | None = None
    # The dtype the op runs in under torch.autocast (its register_autocast), float64 excepted;
    # None: autocast leaves its inputs alone.
    autocast_dtype: torch.dtype | None = None

    def __reduce__(self):
        # By name (to a worker process): its functions need not be picklable.
        return (_registered_spec, (self.name,))

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"OpSpec {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def largest_shape(self) -> tuple:
        return self.large_shape or LARGE_SHAPES[self.kind]

    def op_result(self, result):
        """What the public function returns, from what the registered op returned."""
        return result if self.op_output is None else self.op_output(result)

    def overload(self, namespace: str, name: str | None = None):
        return getattr(getattr(torch.ops, namespace), name or self.name).default

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


def _registered_spec(name: str) -> OpSpec:
    from . import ops

    return next(spec for spec in ops.specs() if spec.name == name)
