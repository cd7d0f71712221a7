"""Input checks of the fake (meta) kernels, with the compiled kernels' messages.

The compiled kernels check their inputs in csrc/common/checks.cpp; under torch.compile the
fake kernels run instead, so they raise the same errors here.
"""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def check_inputs(op: str, x: torch.Tensor, w: torch.Tensor, reduces_last_dim: bool) -> str:
    """Returns "full" (w has x's shape) or "per_feature" (w is 1-D with x.shape[-1] elements)."""
    for name, t in (("x", x), ("w", w)):
        if t.dtype not in FLOAT_DTYPES:
            raise ValueError(
                f"{op}: argument '{name}' must have dtype float32, float64, float16 or bfloat16, got {_dtype(t)}"
            )
    if x.dtype != w.dtype:
        raise ValueError(f"{op}: arguments 'x' and 'w' must have the same dtype, got x {_dtype(x)} and w {_dtype(w)}")
    if x.device != w.device:
        raise ValueError(
            f"{op}: arguments 'x' and 'w' must be on the same device, got x on {x.device} and w on {w.device}"
        )
    if reduces_last_dim and x.dim() == 0:
        raise ValueError(
            f"{op}: argument 'x' must have at least 1 dimension to reduce over its last one, "
            "got a 0-dim tensor of shape []"
        )
    if w.shape == x.shape:
        return "full"
    if x.dim() >= 1 and w.dim() == 1 and w.shape[0] == x.shape[-1]:
        return "per_feature"
    expected = f"x's shape {_shape(x.shape)}"
    if x.dim() >= 1:
        expected += f" or be 1-D with x.shape[-1] = {x.shape[-1]} elements"
    raise ValueError(
        f"{op}: argument 'w' must have {expected}, got shape {_shape(w.shape)} for x of shape {_shape(x.shape)}"
    )


def check_like_x(op: str, arg: str, t: torch.Tensor, x: torch.Tensor, expected_shape) -> None:
    """`arg` (an incoming gradient, an out= tensor) must match x's dtype and device and have expected_shape."""
    if t.dtype != x.dtype:
        raise ValueError(f"{op}: argument '{arg}' must have x's dtype {_dtype(x)}, got {_dtype(t)}")
    if t.device != x.device:
        raise ValueError(f"{op}: argument '{arg}' must be on x's device {x.device}, got {t.device}")
    if tuple(t.shape) != tuple(expected_shape):
        raise ValueError(f"{op}: argument '{arg}' must have the shape {_shape(expected_shape)}, got {_shape(t.shape)}")
