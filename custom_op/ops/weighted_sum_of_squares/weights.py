"""weighted_sum_of_squares' weight, checked as the C++ kernels check it
(weighted_sum_of_squares_weight_form.cpp): x has a last dimension to sum over, and w has x's
shape or is 1-D with x.shape[-1] elements (one weight per feature)."""

from __future__ import annotations

import torch

from ...checks import check_pair, shape_str


def check_inputs(op: str, x: torch.Tensor, w: torch.Tensor) -> str:
    """Returns "full" (w has x's shape) or "per_feature" (w is 1-D with x.shape[-1] elements)."""
    check_pair(op, "x", x, "w", w)
    if x.dim() == 0:
        raise ValueError(
            f"{op}: argument 'x' must have at least 1 dimension to reduce over its last one, "
            "got a 0-dim tensor of shape []"
        )
    if w.shape == x.shape:
        return "full"
    if w.dim() == 1 and w.shape[0] == x.shape[-1]:
        return "per_feature"
    raise ValueError(
        f"{op}: argument 'w' must have x's shape {shape_str(x.shape)} or be 1-D with x.shape[-1] = "
        f"{x.shape[-1]} elements, got shape {shape_str(w.shape)} for x of shape {shape_str(x.shape)}"
    )
