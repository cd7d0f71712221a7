"""weighted_square: y = w * x**2, elementwise (the simple example).

Kernels: weighted_square_cpu.cpp and _cuda.cu (forward, out= and in place), _backward_cpu.cpp
and _backward_cuda.cu (the fused backward, shared with weighted_sum_of_squares); schemas:
weighted_square_schema.cpp; the weight checks: weights.py and _weight_form.cpp; the test and
benchmark description: testing.py.
"""

from __future__ import annotations

import functools

import torch

from ..._autograd import refuse_grad
from ..._dispatch import call
from ..._library import NAMESPACE
from ...checks import check_like
from .weights import check_inputs, register_weighted

__all__ = ["weighted_square", "weighted_square_"]

PUBLIC = f"{NAMESPACE}::weighted_square"
_ops = getattr(torch.ops, NAMESPACE)
_INSTEAD = f"{NAMESPACE}.weighted_square(x, w)"


def register(namespace: str) -> None:
    """Fake kernels, autograd and autocast for the ops of a loaded library's `namespace`."""
    register_weighted(namespace, "weighted_square", PUBLIC, lambda x: x.shape)

    @torch.library.register_fake(f"{namespace}::weighted_square.out")
    def _fake_out(x, w, *, out):
        check_inputs(PUBLIC, x, w, False)
        check_like(PUBLIC, "out", out, x, x.shape)

    @torch.library.register_fake(f"{namespace}::weighted_square_")
    def _fake_inplace(x, w):
        check_inputs(PUBLIC, x, w, False)


def bind(namespace: str) -> dict:
    """The ops of `namespace` as plain callables (for custom_op.jit)."""
    packet = getattr(torch.ops, namespace)
    return {
        "weighted_square": functools.partial(call, packet.weighted_square.default),
        "weighted_square_out": functools.partial(call, packet.weighted_square.out),
        "weighted_square_": functools.partial(call, packet.weighted_square_.default),
    }


def weighted_square(x: torch.Tensor, w: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """y = w * x**2, elementwise.

    x: a float32, float64, float16 or bfloat16 tensor on the CPU or a CUDA GPU, any shape.
    w: x's dtype and device; x's shape, or 1-D with x.shape[-1] elements (one weight per feature).
    Returns a new contiguous tensor of x's shape. Differentiable in x and w; works under
    torch.compile(fullgraph=True). With out= (x's shape, dtype and device), writes there instead
    and returns out (not differentiable).
    """
    if out is not None:
        refuse_grad(PUBLIC, "weighted_square(out=...)", _INSTEAD, x, w, out)
        call(_ops.weighted_square.out, x, w, out=out)
        return out
    return call(_ops.weighted_square.default, x, w)


def weighted_square_(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """In place: x becomes w * x**2 and is returned; no memory is allocated when x is contiguous.

    Not differentiable (as most in-place operations on leaves that require grad).
    """
    refuse_grad(PUBLIC, "weighted_square_", _INSTEAD, x, w)
    call(_ops.weighted_square_.default, x, w)
    return x
