"""Input checks for fake (meta) kernels, with the same messages as the C++ checks (csrc/common/checks.h).

Under torch.compile the fake kernels run instead of the compiled ones, so they must raise the
same errors. Each message names the operator, the argument, what was expected and what was given.
"""

from __future__ import annotations

import math
from typing import NoReturn

import torch

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def fail_argument(op: str, arg: str, expected: str, got: str) -> NoReturn:
    """An operator's own check, worded as the shared ones: "<op>: argument '<arg>' must <expected>, got
    <got>". C++: fail_argument in csrc/common/checks.h, with the same words."""
    raise ValueError(f"{op}: argument '{arg}' must {expected}, got {got}")


def check_float(op: str, arg: str, t: torch.Tensor) -> None:
    """`arg` must be float32, float64, float16 or bfloat16."""
    if t.dtype not in FLOAT_DTYPES:
        raise ValueError(
            f"{op}: argument '{arg}' must have dtype float32, float64, float16 or bfloat16, got {dtype_name(t)}"
        )


def check_pair(op: str, a_name: str, a: torch.Tensor, b_name: str, b: torch.Tensor) -> None:
    """Two inputs of an operator: both floating, the same dtype, the same device."""
    check_float(op, a_name, a)
    check_float(op, b_name, b)
    if a.dtype != b.dtype:
        raise ValueError(
            f"{op}: arguments '{a_name}' and '{b_name}' must have the same dtype, "
            f"got {a_name} {dtype_name(a)} and {b_name} {dtype_name(b)}"
        )
    if a.device != b.device:
        raise ValueError(
            f"{op}: arguments '{a_name}' and '{b_name}' must be on the same device, "
            f"got {a_name} on {a.device} and {b_name} on {b.device}"
        )


def _check_device_and_shape(op: str, arg: str, t: torch.Tensor, like: torch.Tensor, expected_shape, like_name: str):
    if t.device != like.device:
        raise ValueError(f"{op}: argument '{arg}' must be on {like_name}'s device {like.device}, got {t.device}")
    if tuple(t.shape) != tuple(expected_shape):
        raise ValueError(
            f"{op}: argument '{arg}' must have the shape {shape_str(expected_shape)}, got {shape_str(t.shape)}"
        )


def check_like(op: str, arg: str, t: torch.Tensor, like: torch.Tensor, expected_shape, like_name: str = "x") -> None:
    """`arg` (an incoming gradient, an out= tensor) must have `like`'s dtype and device and expected_shape."""
    if t.dtype != like.dtype:
        expected = f"{like_name}'s dtype {dtype_name(like)}"
        raise ValueError(f"{op}: argument '{arg}' must have {expected}, got {dtype_name(t)}")
    _check_device_and_shape(op, arg, t, like, expected_shape, like_name)


def check_rows(op: str, arg: str, t: torch.Tensor, verb: str) -> None:
    """`arg` must have a last dimension for a row-wise op to `verb` over (normalize, reduce)."""
    if t.dim() == 0:
        raise ValueError(
            f"{op}: argument '{arg}' must have at least 1 dimension to {verb} over its last one, "
            "got a 0-dim tensor of shape []"
        )


def check_last_dim_weight(op: str, x_name: str, x: torch.Tensor, w_name: str, w: torch.Tensor) -> None:
    """A per-feature weight of an op over x's last dimension (x checked by check_rows first): w is 1-D
    with x.shape[-1] elements."""
    if w.dim() != 1 or w.shape[0] != x.shape[-1]:
        h = x.shape[-1]
        raise ValueError(
            f"{op}: argument '{w_name}' must have shape [{h}] ({x_name}.shape[-1] = {h}), "
            f"got shape {shape_str(w.shape)} for {x_name} of shape {shape_str(x.shape)}"
        )


def number_str(value: float) -> str:
    """The shortest text that reads back as `value` (repr, without a trailing ".0"), as the C++
    checks' number_str writes it: "-1", "0.5", "1e-06", "-0.1234567", "inf"."""
    text = repr(float(value))
    return text.removesuffix(".0")


def check_finite_nonnegative(op: str, arg: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{op}: argument '{arg}' must be a finite number >= 0, got {number_str(value)}")


def check_ndim(op: str, arg: str, t: torch.Tensor, ndim: int, layout: str) -> None:
    """`arg` must have `ndim` dimensions, laid out as `layout` says."""
    if t.dim() != ndim:
        raise ValueError(f"{op}: argument '{arg}' must be {ndim}-D {layout}, got shape {shape_str(t.shape)}")


def check_dim_nonempty(op: str, arg: str, t: torch.Tensor, dim: int, what: str) -> None:
    """`arg`'s dimension `dim` must not be empty; `what` says what it holds."""
    if t.shape[dim] == 0:
        raise ValueError(f"{op}: argument '{arg}' must have {what}, got shape {shape_str(t.shape)}")


def check_index_per_row(op: str, arg: str, t: torch.Tensor, like: torch.Tensor, like_name: str) -> None:
    """`arg` (labels, positions, indices): int64, on `like`'s device, 1-D with like.shape[0] values."""
    if t.dtype != torch.int64:
        raise ValueError(f"{op}: argument '{arg}' must have dtype int64, got {dtype_name(t)}")
    if t.device != like.device:
        whose = like_name + ("'" if like_name.endswith("s") else "'s")
        raise ValueError(f"{op}: argument '{arg}' must be on {whose} device {like.device}, got {t.device}")
    n = like.shape[0]
    if t.dim() != 1 or t.shape[0] != n:
        raise ValueError(
            f"{op}: argument '{arg}' must have shape [{n}] ({like_name}.shape[0] = {n}), got shape {shape_str(t.shape)}"
        )


def check_acc_like(
    op: str, arg: str, t: torch.Tensor, like: torch.Tensor, expected_shape, like_name: str = "x"
) -> None:
    """`arg` (a saved statistic such as rstd) must have `like`'s accumulate dtype (float64 for
    float64, float32 for the others), `like`'s device and expected_shape."""
    acc = torch.float64 if like.dtype == torch.float64 else torch.float32
    if t.dtype != acc:
        expected = f"dtype {str(acc).removeprefix('torch.')} (the accumulate dtype of {like_name}'s {dtype_name(like)})"
        raise ValueError(f"{op}: argument '{arg}' must have {expected}, got {dtype_name(t)}")
    _check_device_and_shape(op, arg, t, like, expected_shape, like_name)
