"""What is measured: every operator of the registry, forward and forward+backward (and on request
the backward alone), over dtypes and the sizes its testing.py names, against its baseline (what
PyTorch users would call instead) in eager PyTorch and under torch.compile (compiled per shape,
dynamic=False)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from custom_op import ops
from custom_op.testing import OpSpec, Sample, outputs

SPECS = {spec.name: spec for spec in ops.specs()}
OPS = tuple(SPECS)
MODES = ("forward", "forward+backward", "backward")
# The backward alone only on request (--mode backward): each of its cases compiles the baseline again.
DEFAULT_MODES = ("forward", "forward+backward")


@dataclass(frozen=True)
class Case:
    op: str
    mode: str
    dtype: torch.dtype
    shape: tuple[int, ...]  # the first input's shape; the op's make_sample builds the rest

    @property
    def spec(self) -> OpSpec:
        return SPECS[self.op]

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def label(self) -> str:
        size = "x".join(map(str, self.shape)) if len(self.shape) > 1 else f"2^{self.numel.bit_length() - 1}"
        return f"{self.op} {self.mode} {self.dtype_name} {size}"

    def sample(self, device: str) -> Sample:
        return self.spec.sample_of_shape(self.shape, self.dtype, device)

    def bytes_moved(self) -> int:
        """Bytes that must move: each input read once, each output written once (the op's count);
        the backward's are the forward+backward count less the forward's."""
        sample = self.sample("meta")
        forward = self.spec.bytes_moved(sample, False)
        if self.mode == "forward":
            return forward
        both = self.spec.bytes_moved(sample, True)
        return both - forward if self.mode == "backward" else both


def dtypes(device: str, quick: bool) -> list[torch.dtype]:
    if quick or device == "cpu":
        return [torch.float32]
    return [torch.float32, torch.bfloat16, torch.float16]


def all_cases(device: str, quick: bool, modes=DEFAULT_MODES) -> list[Case]:
    return [
        Case(spec.name, mode, dtype, tuple(shape))
        for dtype in dtypes(device, quick)
        for mode in MODES
        if mode in modes
        for spec in SPECS.values()
        for shape in spec.bench_shapes(device, quick)
    ]


def implementations(case: Case, sample: Sample) -> dict[str, Callable]:
    """The op, its other ways to call (forward), and its baseline eager and compiled: never its test
    reference, which is written for accuracy, not speed."""
    spec = case.spec
    impls = {"custom_op": spec.function}
    if case.mode == "forward" and spec.bench_variants is not None:
        impls.update(spec.bench_variants(sample))
    if spec.baseline is not None:
        impls["eager"] = spec.baseline
        torch._dynamo.reset()  # compiled for this shape alone, as a user would at their best
        compiled = torch.compile(spec.baseline, dynamic=False, fullgraph=True)
        if case.mode == "backward":  # a backward run again needs its saved tensors: none donated to outputs
            compiled = torch._functorch.config.patch(donated_buffer=False)(compiled)
        impls["torch.compile"] = compiled
    if spec.other_libraries is not None:
        impls.update(spec.other_libraries(sample.tensors[0].device.type))
    return impls


def without_baseline() -> list[str]:
    """Operators whose spec names no baseline: timed alone."""
    return [name for name, spec in SPECS.items() if spec.baseline is None]


def runner(case: Case, impl: Callable, sample: Sample) -> Callable[[], object]:
    """A closure running one call as a user would, on the case's fixed random inputs: a copy of its
    own, so that an implementation writing into its inputs (Liger-Kernel's cross-entropy writes
    the gradient over the logits) changes no other's."""
    sample = sample.with_args(a.clone() if isinstance(a, torch.Tensor) else a for a in sample.args)
    args = sample.args
    if case.mode == "forward":
        return lambda: impl(*args, **sample.kwargs)
    leaves = case.spec.leaves(sample)
    inputs = case.spec.grad_inputs(leaves)
    # The gradient of each of the implementation's outputs: 1 for a reduced loss, as .backward() passes.
    made = outputs(impl(*leaves.args, **leaves.kwargs))
    grads = [torch.randn_like(out.detach()) if out.dim() else torch.ones_like(out.detach()) for out in made]
    if case.mode == "backward":  # one forward; each call runs its graph's backward again
        return lambda: torch.autograd.grad(made, inputs, grads, retain_graph=True)
    return lambda: torch.autograd.grad(outputs(impl(*leaves.args, **leaves.kwargs)), inputs, grads)
