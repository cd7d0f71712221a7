"""weighted_square's weight, checked as the C++ kernels check it (weighted_square_weight_form.cpp):
w has x's shape, or is 1-D with x.shape[-1] elements (one weight per feature)."""

from __future__ import annotations

import torch

from ...checks import check_pair, shape_str


def check_inputs(op: str, x: torch.Tensor, w: torch.Tensor) -> str:
    """Returns "full" (w has x's shape) or "per_feature" (w is 1-D with x.shape[-1] elements)."""
    check_pair(op, "x", x, "w", w)
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
