"""weighted_sum_of_squares: s = sum_j w_j * x[..., j]**2 over the last dimension (the core of
RMSNorm); the tuned example: what tuning a kernel looks like (weighted_sum_of_squares_cuda.cu).

Kernels: weighted_sum_of_squares_cpu.cpp and _cuda.cu (forward), _backward_cpu.cpp and
_backward_cuda.cu (the fused backward); schemas: weighted_sum_of_squares_schema.cpp; the weight
checks: weights.py and _weight_form.cpp; the test and benchmark description: testing.py.
"""

from __future__ import annotations

import functools

import torch

from ..._autograd import refuse_double_backward
from ..._dispatch import call
from ..._library import NAMESPACE
from ...checks import check_like
from .weights import check_inputs

__all__ = ["weighted_sum_of_squares"]

PUBLIC = f"{NAMESPACE}::weighted_sum_of_squares"
_ops = getattr(torch.ops, NAMESPACE)

# Autocast: float32, as PyTorch runs pow and sum under autocast: sums of squares overflow or lose
# precision in float16/bfloat16 where matmuls do not.
AUTOCAST_DEVICES = ("cpu", "cuda")
AUTOCAST_DTYPE = torch.float32


def register(namespace: str) -> None:
    """Fake kernels, autograd and autocast for the ops of a loaded library's `namespace`."""
    qualname = f"{namespace}::weighted_sum_of_squares"
    backward_op = getattr(torch.ops, namespace).weighted_sum_of_squares_backward.default

    # Fake kernels: output shapes and strides as the real kernels make them (new, contiguous).
    @torch.library.register_fake(qualname)
    def _fake(x, w):
        check_inputs(PUBLIC, x, w)
        return x.new_empty(x.shape[:-1])

    @torch.library.register_fake(f"{qualname}_backward")
    def _fake_backward(grad, x, w, deterministic=False):
        check_inputs(PUBLIC, x, w)
        check_like(PUBLIC, "grad", grad, x, x.shape[:-1])
        return x.new_empty(x.shape), w.new_empty(w.shape)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad_x, grad_w = backward_op(grad, x, w, torch.are_deterministic_algorithms_enabled())
        return (grad_x if ctx.needs_input_grad[0] else None, grad_w if ctx.needs_input_grad[1] else None)

    torch.library.register_autograd(qualname, backward, setup_context=setup_context)
    refuse_double_backward(PUBLIC, f"{qualname}_backward")
    # Autocast runs before autograd: the op saves and differentiates the float32 inputs, and the
    # casts' own backward returns the gradients in the inputs' dtypes.
    for device_type in AUTOCAST_DEVICES:
        torch.library.register_autocast(qualname, device_type, AUTOCAST_DTYPE)


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
