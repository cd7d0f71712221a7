"""What is measured: each op forward and forward+backward, over dtypes and sizes, against eager
PyTorch, torch.compile (compiled per shape, dynamic=False) and, on the GPU, the seed kernel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

import custom_op

OPS = ("weighted_square", "weighted_sum_of_squares")
MODES = ("forward", "forward+backward")


def eager_weighted_square(x, w):
    return w * x.pow(2)


def eager_weighted_sum_of_squares(x, w):
    return (w * x * x).sum(-1)


EAGER = {"weighted_square": eager_weighted_square, "weighted_sum_of_squares": eager_weighted_sum_of_squares}
CUSTOM = {"weighted_square": custom_op.weighted_square, "weighted_sum_of_squares": custom_op.weighted_sum_of_squares}


@dataclass(frozen=True)
class Case:
    op: str
    mode: str
    dtype: torch.dtype
    shape: tuple[int, ...]  # x's shape; w is x's shape (elementwise) or [shape[-1]] (reduction)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def w_shape(self) -> tuple[int, ...]:
        return self.shape if self.op == "weighted_square" else self.shape[-1:]

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def label(self) -> str:
        size = "x".join(map(str, self.shape)) if len(self.shape) > 1 else f"2^{self.numel.bit_length() - 1}"
        return f"{self.op} {self.mode} {self.dtype_name} {size}"

    def bytes_moved(self) -> int:
        """Bytes that must move: each input read once, each output written once."""
        n, d = self.numel, self.shape[-1]
        rows = n // d
        e = torch.finfo(self.dtype).bits // 8
        if self.op == "weighted_square":  # w like x
            forward, backward = 3 * n, 5 * n  # x, w -> y; grad, x, w -> grad_x, grad_w
        else:  # 1-D w
            forward, backward = n + d + rows, rows + n + d + n + d
        return e * (forward + (backward if self.mode == "forward+backward" else 0))


def elementwise_sizes(device: str, quick: bool) -> list[int]:
    if quick:
        return [2**16, 2**20]
    return [2**k for k in (16, 18, 20, 22, 24, 26, 27)] if device == "cuda" else [2**16, 2**20, 2**24]


def row_shapes(device: str, quick: bool) -> list[tuple[int, int]]:
    if quick:
        return [(4096, 256)]
    if device == "cuda":
        return [(1048576, 128), (65536, 1024), (8192, 4096), (4096, 65536)]
    return [(131072, 128), (16384, 1024), (4096, 4096), (256, 65536)]


def dtypes(device: str, quick: bool) -> list[torch.dtype]:
    if quick or device == "cpu":
        return [torch.float32]
    return [torch.float32, torch.bfloat16, torch.float16]


def all_cases(device: str, quick: bool) -> list[Case]:
    cases = []
    for dtype in dtypes(device, quick):
        for mode in MODES:
            cases += [Case("weighted_square", mode, dtype, (n,)) for n in elementwise_sizes(device, quick)]
            cases += [Case("weighted_sum_of_squares", mode, dtype, s) for s in row_shapes(device, quick)]
    return cases


def _in_place(x, w):
    return custom_op.weighted_square_(x, w)


_in_place.in_place = True  # the runner gives it w = 1/x, so x stays x call after call


def implementations(case: Case, device: str) -> dict[str, Callable]:
    impls = {"custom_op": CUSTOM[case.op], "eager": EAGER[case.op]}
    if case.op == "weighted_square" and case.mode == "forward":
        out = torch.empty(case.shape, device=device, dtype=case.dtype)
        impls["custom_op out="] = lambda x, w: custom_op.weighted_square(x, w, out=out)
        impls["custom_op in place"] = _in_place
    torch._dynamo.reset()  # compiled for this shape alone, as a user would at their best
    impls["torch.compile"] = torch.compile(EAGER[case.op], dynamic=False, fullgraph=True)
    if device == "cuda" and case.op == "weighted_square" and case.mode == "forward" and case.dtype == torch.float32:
        from .seed_kernel import seed_weighted_square

        impls["seed kernel"] = seed_weighted_square
    return impls


def runner(case: Case, impl: Callable, device: str) -> Callable[[], object]:
    """A closure running one call as a user would, on fixed random inputs (never zeros)."""
    x = torch.randn(case.shape, device=device, dtype=case.dtype)
    w = torch.randn(case.w_shape, device=device, dtype=case.dtype)
    if getattr(impl, "in_place", False):
        w = x.reciprocal()  # w * x^2 = x: the same values every call
    if case.mode == "forward":
        return lambda: impl(x, w)
    x.requires_grad_()
    w.requires_grad_()
    out_shape = case.shape if case.op == "weighted_square" else case.shape[:-1]
    grad = torch.randn(out_shape, device=device, dtype=case.dtype)
    return lambda: torch.autograd.grad(impl(x, w), (x, w), grad)
