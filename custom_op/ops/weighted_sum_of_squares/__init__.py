"""weighted_sum_of_squares: s = sum_j w_j * x[..., j]**2 over the last dimension (the core of
RMSNorm); the tuned example: what tuning a kernel looks like (weighted_sum_of_squares_cuda.cu).

Kernels: weighted_sum_of_squares_cpu.cpp and _cuda.cu; the backward is weighted_square's fused
one with grad per row; schemas: weighted_sum_of_squares_schema.cpp; the test and benchmark
description: testing.py.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..._library import NAMESPACE
from ..weighted_square.weights import register_weighted

__all__ = ["weighted_sum_of_squares"]

PUBLIC = f"{NAMESPACE}::weighted_sum_of_squares"
_differentiable: dict[str, Callable] = {}  # per loaded namespace: the op with its autograd


def register(namespace: str) -> None:
    """Fake kernels, autograd and autocast for the ops of a loaded library's `namespace`."""
    _differentiable[namespace] = register_weighted(namespace, "weighted_sum_of_squares", PUBLIC, lambda x: x.shape[:-1])


def bind(namespace: str) -> dict:
    """The ops of `namespace` as plain callables (for custom_op.jit)."""
    return {"weighted_sum_of_squares": _differentiable[namespace]}


def weighted_sum_of_squares(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """s = sum_j w_j * x[..., j]**2 over the last dimension (the core of RMSNorm).

    x: at least 1-D, float32, float64, float16 or bfloat16, on the CPU or a CUDA GPU.
    w: x's dtype and device; x's shape, or 1-D with x.shape[-1] elements.
    Returns a new contiguous tensor of shape x.shape[:-1]; half types accumulate in float32.
    Differentiable in x and w; works under torch.compile(fullgraph=True).
    """
    return _differentiable[NAMESPACE](x, w)
