"""The weight of the two example operators, checked as the C++ kernels check it (weight_form.cpp):
w has x's shape, or is 1-D with x.shape[-1] elements (one weight per feature)."""

from __future__ import annotations

import torch

from ..._autograd import refuse_double_backward
from ...checks import check_like, check_pair, shape_str

# Autocast: float32, as PyTorch runs pow and sum under autocast: squares and sums of squares
# overflow or lose precision in float16/bfloat16 where matmuls do not.
AUTOCAST_DEVICES = ("cpu", "cuda")
AUTOCAST_DTYPE = torch.float32


def check_inputs(op: str, x: torch.Tensor, w: torch.Tensor, reduces_last_dim: bool) -> str:
    """Returns "full" (w has x's shape) or "per_feature" (w is 1-D with x.shape[-1] elements)."""
    check_pair(op, "x", x, "w", w)
    if reduces_last_dim and x.dim() == 0:
        raise ValueError(
            f"{op}: argument 'x' must have at least 1 dimension to reduce over its last one, "
            "got a 0-dim tensor of shape []"
        )
    if w.shape == x.shape:
        return "full"
    if x.dim() >= 1 and w.dim() == 1 and w.shape[0] == x.shape[-1]:
        return "per_feature"
    expected = f"x's shape {shape_str(x.shape)}"
    if x.dim() >= 1:
        expected += f" or be 1-D with x.shape[-1] = {x.shape[-1]} elements"
    raise ValueError(
        f"{op}: argument 'w' must have {expected}, got shape {shape_str(w.shape)} for x of shape {shape_str(x.shape)}"
    )


def register_weighted(namespace: str, name: str, public: str, output_shape) -> None:
    """Fake kernels, autograd (through the fused backward op) and autocast of the op `name`."""
    qualname = f"{namespace}::{name}"
    reduces = name != "weighted_square"
    backward_op = getattr(getattr(torch.ops, namespace), f"{name}_backward").default

    # Fake kernels: output shapes and strides as the real kernels make them (new, contiguous).
    @torch.library.register_fake(qualname)
    def _fake(x, w):
        check_inputs(public, x, w, reduces)
        return x.new_empty(output_shape(x))

    @torch.library.register_fake(f"{qualname}_backward")
    def _fake_backward(grad, x, w, deterministic=False):
        check_inputs(public, x, w, reduces)
        check_like(public, "grad", grad, x, output_shape(x))
        return x.new_empty(x.shape), w.new_empty(w.shape)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad_x, grad_w = backward_op(grad, x, w, torch.are_deterministic_algorithms_enabled())
        return (grad_x if ctx.needs_input_grad[0] else None, grad_w if ctx.needs_input_grad[1] else None)

    torch.library.register_autograd(qualname, backward, setup_context=setup_context)
    refuse_double_backward(public, f"{qualname}_backward")
    # Autocast runs before autograd: the op saves and differentiates the float32 inputs, and the
    # casts' own backward returns the gradients in the inputs' dtypes.
    for device_type in AUTOCAST_DEVICES:
        torch.library.register_autocast(qualname, device_type, AUTOCAST_DTYPE)
