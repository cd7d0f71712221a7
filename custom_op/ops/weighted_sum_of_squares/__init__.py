"""weighted_sum_of_squares: s = sum_j w_j * x[..., j]**2 over the last dimension (the core of
RMSNorm); the tuned example: what tuning a kernel looks like (weighted_sum_of_squares_cuda.cu).

Kernels: weighted_sum_of_squares_cpu.cpp and _cuda.cu; the backward is weighted_square's fused
one with grad per row; schemas: weighted_sum_of_squares_schema.cpp; the test and benchmark
description: testing.py.
"""

from __future__ import annotations

import functools

import torch

from ..._dispatch import call
from ..._library import NAMESPACE
from ..weighted_square.weights import register_weighted

__all__ = ["weighted_sum_of_squares"]

PUBLIC = f"{NAMESPACE}::weighted_sum_of_squares"
_ops = getattr(torch.ops, NAMESPACE)


def register(namespace: str) -> None:
    """Fake kernels, autograd and autocast for the ops of a loaded library's `namespace`."""
    register_weighted(namespace, "weighted_sum_of_squares", PUBLIC, lambda x: x.shape[:-1])


def bind(namespace: str) -> dict:
    """The ops of `namespace` as plain callables (for custom_op.jit)."""
    packet = getattr(torch.ops, namespace)
    return {"weighted_sum_of_squares": functools.partial(call, packet.weighted_sum_of_squares.default)}


def weighted_sum_of_squares(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """s = sum_j w_j * x[..., j]**2 over the last dimension (the core of RMSNorm).

    x: at least 1-D, float32, float64, float16 or bfloat16, on the CPU or a CUDA GPU.
    w: x's dtype and device; x's shape, or 1-D with x.shape[-1] elements.
    Returns a new contiguous tensor of shape x.shape[:-1]; half types accumulate in float32.
    Differentiable in x and w; works under torch.compile(fullgraph=True).
    """
    return call(_ops.weighted_sum_of_squares.default, x, w)
