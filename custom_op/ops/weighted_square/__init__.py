"""weighted_square: y = w * x**2, elementwise, w of x's shape (the smallest complete example).

Files: weighted_square_schema.cpp (the schemas), weighted_square_checks.h (the input checks),
weighted_square_math.h (the math, once for both backends), weighted_square_cpu.cpp and _cuda.cu
(the forward kernels), weighted_square_backward_cpu.cpp and _backward_cuda.cu (the fused backward),
this file (the Python API, fake kernels, autograd on the op, autocast), sharding.py (DTensor) and
testing.py (what the shared tests and the benchmark need to know). The page:
docs/ops/weighted_square.md.
"""

from __future__ import annotations

import functools

import torch

from ..._autograd import call_backward
from ..._dispatch import call
from ..._library import NAMESPACE
from ..._sharding import register_rules
from ...checks import check_like, check_pair

__all__ = ["weighted_square"]

PUBLIC = f"{NAMESPACE}::weighted_square"
_ops = getattr(torch.ops, NAMESPACE)

# Autocast: float32, as PyTorch runs pow under autocast: squares overflow or lose precision in
# float16/bfloat16 where matmuls do not.
AUTOCAST_DEVICES = ("cpu", "cuda")
AUTOCAST_DTYPE = torch.float32


def _check(x, w) -> None:
    check_pair(PUBLIC, "x", x, "w", w)
    check_like(PUBLIC, "w", w, x, x.shape)


def register(namespace: str) -> None:
    """Fake kernels, autograd and autocast for the ops of a loaded library's `namespace`."""
    qualname = f"{namespace}::weighted_square"
    backward_op = getattr(torch.ops, namespace).weighted_square_backward.default

    # Fake kernels (torch.compile, meta tensors): the real kernels' checks, messages and outputs.
    @torch.library.register_fake(qualname)
    def _fake(x, w):
        _check(x, w)
        return x.new_empty(x.shape)

    @torch.library.register_fake(f"{qualname}_backward")
    def _fake_backward(grad, x, w):
        _check(x, w)
        check_like(PUBLIC, "grad", grad, x, x.shape)
        return x.new_empty(x.shape), w.new_empty(w.shape)

    # Autograd on the op: x and w are saved; the backward op computes both gradients in one pass.
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad_x, grad_w = call_backward(PUBLIC, backward_op, grad, x, w)
        return (grad_x if ctx.needs_input_grad[0] else None, grad_w if ctx.needs_input_grad[1] else None)

    torch.library.register_autograd(qualname, backward, setup_context=setup_context)
    # Autocast runs before autograd: the op saves and differentiates the float32 inputs, and the
    # casts' own backward returns the gradients in the inputs' dtypes.
    for device_type in AUTOCAST_DEVICES:
        torch.library.register_autocast(qualname, device_type, AUTOCAST_DTYPE)
    # How the forward and backward shard across processes (DTensor): sharding.py.
    register_rules(f"{__name__}.sharding", namespace)


def bind(namespace: str) -> dict:
    """The ops of `namespace` as plain callables (for custom_op.jit)."""
    return {"weighted_square": functools.partial(call, getattr(torch.ops, namespace).weighted_square.default)}


def weighted_square(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y = w * x**2, elementwise.

    x: a float32, float64, float16 or bfloat16 tensor on the CPU or a CUDA GPU, any shape and
    strides. w: x's dtype, device and shape. Returns a new contiguous tensor of x's shape.
    Differentiable in x and w, as is torch.ops.custom_op.weighted_square; works under
    torch.compile(fullgraph=True).
    """
    return call(_ops.weighted_square.default, x, w)
