"""weighted_square: y = w * x**2, elementwise (the simple example).

Kernels: weighted_square_cpu.cpp and _cuda.cu (forward, out= and in place), _backward_cpu.cpp
and _backward_cuda.cu (the fused backward); schemas: weighted_square_schema.cpp; the weight
checks: weights.py and _weight_form.cpp; the test and benchmark description: testing.py.
"""

from __future__ import annotations

import functools

import torch

from ..._autograd import call_backward, refuse_grad
from ..._dispatch import call
from ..._library import NAMESPACE
from ..._sharding import register_rules
from ...checks import check_like
from .weights import check_inputs

__all__ = ["weighted_square", "weighted_square_"]

PUBLIC = f"{NAMESPACE}::weighted_square"
_ops = getattr(torch.ops, NAMESPACE)
_INSTEAD = f"{NAMESPACE}.weighted_square(x, w)"

# Autocast: float32, as PyTorch runs pow under autocast: squares overflow or lose precision in
# float16/bfloat16 where matmuls do not.
AUTOCAST_DEVICES = ("cpu", "cuda")
AUTOCAST_DTYPE = torch.float32


def register(namespace: str) -> None:
    """Fake kernels, autograd and autocast for the ops of a loaded library's `namespace`."""
    qualname = f"{namespace}::weighted_square"
    backward_op = getattr(torch.ops, namespace).weighted_square_backward.default

    # Fake kernels: output shapes and strides as the real kernels make them (new, contiguous).
    @torch.library.register_fake(qualname)
    def _fake(x, w):
        check_inputs(PUBLIC, x, w)
        return x.new_empty(x.shape)

    @torch.library.register_fake(f"{qualname}_backward")
    def _fake_backward(grad, x, w, deterministic=False):
        check_inputs(PUBLIC, x, w)
        check_like(PUBLIC, "grad", grad, x, x.shape)
        return x.new_empty(x.shape), w.new_empty(w.shape)

    @torch.library.register_fake(f"{qualname}.out")
    def _fake_out(x, w, *, out):
        check_inputs(PUBLIC, x, w)
        check_like(PUBLIC, "out", out, x, x.shape)

    @torch.library.register_fake(f"{namespace}::weighted_square_")
    def _fake_inplace(x, w):
        check_inputs(PUBLIC, x, w)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad_x, grad_w = call_backward(PUBLIC, backward_op, grad, x, w, torch.are_deterministic_algorithms_enabled())
        return (grad_x if ctx.needs_input_grad[0] else None, grad_w if ctx.needs_input_grad[1] else None)

    torch.library.register_autograd(qualname, backward, setup_context=setup_context)
    # Autocast runs before autograd: the op saves and differentiates the float32 inputs, and the
    # casts' own backward returns the gradients in the inputs' dtypes.
    for device_type in AUTOCAST_DEVICES:
        torch.library.register_autocast(qualname, device_type, AUTOCAST_DTYPE)
    # How the forward, in-place and backward ops shard across processes (DTensor): sharding.py.
    register_rules(f"{__name__}.sharding", namespace)


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
