"""rms_norm: y = x * rsqrt(mean(x**2, -1) + eps) * weight over the last dimension (RMSNorm).

The forward kernel also returns the per-row rstd = rsqrt(mean(x**2) + eps), which autograd saves
for the fused backward (grad_x and grad_weight in one pass over the rows). Files:
rms_norm_schema.cpp (the schemas), rms_norm_math.h (the math, once for both backends),
rms_norm_checks.h (the input checks), rms_norm_cpu.cpp and rms_norm_backward_cpu.cpp (the CPU
kernels), rms_norm_cuda.cu and rms_norm_backward_cuda.cu (the CUDA kernels; rms_norm_rows.cuh,
how both spread a row), this
file (the Python API, fake kernels, autograd on the op, autocast), testing.py (what the shared
tests and the benchmark need to know). The page: docs/ops/rms_norm.md.
"""

from __future__ import annotations

import functools
import numbers

import torch

from ..._autograd import call_backward
from ..._dispatch import call
from ..._library import NAMESPACE
from ..._sharding import register_rules
from ...checks import (
    check_acc_like,
    check_finite_nonnegative,
    check_last_dim_weight,
    check_like,
    check_pair,
    check_rows,
)

__all__ = ["rms_norm"]

PUBLIC = f"{NAMESPACE}::rms_norm"
_ops = getattr(torch.ops, NAMESPACE)

# Under torch.autocast the op runs in float32, as PyTorch's own normalizations do.
AUTOCAST_DEVICES = ("cpu", "cuda")
_libraries: dict[str, torch.library.Library] = {}  # a registration lasts as long as its Library


def _rstd_dtype(x: torch.Tensor) -> torch.dtype:
    """The kernels' accumulate type: float64 for float64 inputs, float32 for the others."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _check(x, weight, eps) -> None:
    check_pair(PUBLIC, "x", x, "weight", weight)
    check_rows(PUBLIC, "x", x, "normalize")
    check_last_dim_weight(PUBLIC, "x", x, "weight", weight)
    check_finite_nonnegative(PUBLIC, "eps", eps)


def register(namespace: str) -> None:
    """Fake kernels, autograd, autocast and the composite rms_norm for a loaded library's `namespace`."""
    qualname = f"{namespace}::rms_norm"
    packet = getattr(torch.ops, namespace)
    forward_op, backward_op = packet.rms_norm_forward.default, packet.rms_norm_backward.default

    # Fake kernels (torch.compile, meta tensors): the real kernels' checks, messages and outputs.
    @torch.library.register_fake(f"{qualname}_forward")
    def _fake_forward(x, weight, eps=1e-6):
        _check(x, weight, eps)
        return x.new_empty(x.shape), x.new_empty(x.shape[:-1], dtype=_rstd_dtype(x))

    @torch.library.register_fake(f"{qualname}_backward")
    def _fake_backward(grad, x, weight, rstd):
        check_pair(PUBLIC, "x", x, "weight", weight)
        check_rows(PUBLIC, "x", x, "normalize")
        check_last_dim_weight(PUBLIC, "x", x, "weight", weight)
        check_like(PUBLIC, "grad", grad, x, x.shape)
        check_acc_like(PUBLIC, "rstd", rstd, x, x.shape[:-1])
        return x.new_empty(x.shape), weight.new_empty(weight.shape)

    # Autograd on the op: the forward returns (y, rstd); rstd is saved, not recomputed.
    def setup_context(ctx, inputs, output):
        x, weight, _ = inputs
        _, rstd = output
        ctx.mark_non_differentiable(rstd)
        ctx.set_materialize_grads(False)  # rstd's gradient is never used: no zeros made for it
        ctx.save_for_backward(x, weight, rstd)

    def backward(ctx, grad_y, _grad_rstd):
        if grad_y is None:  # y's gradient undefined (materialization is off): nothing flows back
            return None, None, None
        x, weight, rstd = ctx.saved_tensors
        grad_x, grad_weight = call_backward(PUBLIC, backward_op, grad_y, x, weight, rstd)
        return (grad_x if ctx.needs_input_grad[0] else None, grad_weight if ctx.needs_input_grad[1] else None, None)

    torch.library.register_autograd(f"{qualname}_forward", backward, setup_context=setup_context)
    for device_type in AUTOCAST_DEVICES:
        torch.library.register_autocast(f"{qualname}_forward", device_type, torch.float32)

    # torch.ops.<namespace>.rms_norm returns y alone: a composite of the forward op, so it has the
    # forward's autograd, fake kernel and autocast (as torch.ops.aten.rms_norm is of _fused_rms_norm).
    def composite(x, weight, eps=1e-6):
        return forward_op(x, weight, eps)[0]

    _libraries[namespace] = torch.library.Library(namespace, "IMPL")
    _libraries[namespace].impl("rms_norm", composite, "CompositeImplicitAutograd")
    # How the forward and backward shard across processes (DTensor): sharding.py.
    register_rules(f"{__name__}.sharding", namespace)


def bind(namespace: str) -> dict:
    """The ops of `namespace` as plain callables (for custom_op.jit)."""
    return {"rms_norm": functools.partial(call, getattr(torch.ops, namespace).rms_norm.default)}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """y = x * rsqrt(mean(x**2, -1) + eps) * weight, over the last dimension (RMSNorm).

    x: float32, float64, float16 or bfloat16, on the CPU or a CUDA GPU, at least 1-D, any strides.
    weight: x's dtype and device, shape [x.shape[-1]]. eps: a float >= 0. Returns a new contiguous
    tensor of x's shape and dtype; half types compute in float32. Differentiable in x and weight,
    as is torch.ops.custom_op.rms_norm; works under torch.compile(fullgraph=True).
    """
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real | torch.SymFloat | torch.SymInt):
        raise TypeError(f"{PUBLIC}: argument 'eps' must be a float, got {type(eps).__name__}")
    return call(_ops.rms_norm_forward.default, x, weight, eps)[0]
