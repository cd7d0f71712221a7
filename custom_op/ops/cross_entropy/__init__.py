"""cross_entropy: per-row softmax cross-entropy of logits [N, V] with int64 labels [N], the loss a
language model's last layer feeds (F.cross_entropy(logits.float(), labels, reduction="none")).

The forward kernel also returns the per-row log-sum-exp, which autograd saves: the backward reads
the logits once more and writes their gradient, softmax - onehot, with no softmax kept in between.
Files: cross_entropy_schema.cpp (the schemas), cross_entropy_cpu.cpp and cross_entropy_cuda.cu (the
forward kernels), cross_entropy_backward_cpu.cpp and _backward_cuda.cu (the backward kernels),
cross_entropy_rows.cuh (how both CUDA kernels spread a row), cross_entropy_checks.h and
cross_entropy_math.h (shared by both backends), this file (the Python API, fake kernels, autograd on
the op), sharding.py, testing.py (what the tests and the benchmark need to know).
Guide: docs/ops/cross_entropy.md.
"""

from __future__ import annotations

import functools
import numbers

import torch

from ..._autograd import call_backward
from ..._dispatch import call
from ..._library import NAMESPACE
from ..._sharding import register_rules
from ...checks import check_acc_like, check_dim_nonempty, check_float, check_index_per_row, check_ndim

__all__ = ["cross_entropy"]

PUBLIC = f"{NAMESPACE}::cross_entropy"
_ops = getattr(torch.ops, NAMESPACE)

# No autocast rule: under torch.autocast the op reads the logits in their own dtype and accumulates
# in float32 (a cast to float32 first would double the bytes read).
_libraries: dict[str, torch.library.Library] = {}  # a registration lasts as long as its Library


def loss_dtype(logits_dtype: torch.dtype) -> torch.dtype:
    """The loss's (and the saved lse's) dtype: float64 for float64 logits, else float32."""
    return torch.float64 if logits_dtype == torch.float64 else torch.float32


def _check(logits: torch.Tensor, labels: torch.Tensor) -> None:
    """The C++ kernels' checks (cross_entropy_checks.h), with the same messages."""
    check_float(PUBLIC, "logits", logits)
    check_ndim(PUBLIC, "logits", logits, 2, "[N, V] (a row of V class scores per sample)")
    check_dim_nonempty(PUBLIC, "logits", logits, 1, "at least one class (V = logits.shape[1] > 0)")
    check_index_per_row(PUBLIC, "labels", labels, logits, "logits")


def register(namespace: str) -> None:
    """Fake kernels, autograd and the composite cross_entropy for a loaded library's `namespace`."""
    qualname = f"{namespace}::cross_entropy"
    packet = getattr(torch.ops, namespace)
    forward_op, backward_op = packet.cross_entropy_forward.default, packet.cross_entropy_backward.default

    # Fake kernels (torch.compile, meta tensors): the real kernels' checks, messages and outputs.
    # Label values are data: only the real CPU kernel checks their range.
    @torch.library.register_fake(f"{qualname}_forward")
    def _fake_forward(logits, labels, ignore_index=-100):
        _check(logits, labels)
        dtype = loss_dtype(logits.dtype)
        return logits.new_empty(logits.shape[:1], dtype=dtype), logits.new_empty(logits.shape[:1], dtype=dtype)

    @torch.library.register_fake(f"{qualname}_backward")
    def _fake_backward(grad, logits, labels, lse, ignore_index):
        _check(logits, labels)
        check_acc_like(PUBLIC, "grad", grad, logits, logits.shape[:1], "logits")
        check_acc_like(PUBLIC, "lse", lse, logits, logits.shape[:1], "logits")
        return logits.new_empty(logits.shape)

    # Autograd on the op: the forward returns (loss, lse); lse is saved, not recomputed.
    def setup_context(ctx, inputs, output):
        logits, labels, ignore_index = inputs
        _, lse = output
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)  # lse's gradient is never used: no zeros made for it
        ctx.save_for_backward(logits, labels, lse)
        ctx.ignore_index = ignore_index

    def backward(ctx, grad_loss, _grad_lse):
        if grad_loss is None or not ctx.needs_input_grad[0]:
            return None, None, None
        logits, labels, lse = ctx.saved_tensors
        return call_backward(PUBLIC, backward_op, grad_loss, logits, labels, lse, ctx.ignore_index), None, None

    torch.library.register_autograd(f"{qualname}_forward", backward, setup_context=setup_context)

    # torch.ops.<namespace>.cross_entropy returns the loss alone: a composite of the forward op, so
    # it has the forward's autograd and fake kernel.
    def composite(logits, labels, ignore_index=-100):
        return forward_op(logits, labels, ignore_index)[0]

    _libraries[namespace] = torch.library.Library(namespace, "IMPL")
    _libraries[namespace].impl("cross_entropy", composite, "CompositeImplicitAutograd")
    register_rules(f"{__name__}.sharding", namespace)  # DTensor: logits and labels sharded over rows


def bind(namespace: str) -> dict:
    """The ops of `namespace` as plain callables (for custom_op.jit)."""
    return {"cross_entropy": functools.partial(call, getattr(torch.ops, namespace).cross_entropy.default)}


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Per-row cross-entropy: loss[i] = logsumexp(logits[i]) - logits[i, labels[i]], 0 where
    labels[i] == ignore_index; F.cross_entropy(logits.float(), labels, reduction="none",
    ignore_index=ignore_index).

    logits: [N, V], float32, float64, float16 or bfloat16, on the CPU or a CUDA GPU, any strides,
    V >= 1. labels: int64 [N] on logits' device, each in [0, V) or equal to ignore_index (an int;
    a label equal to it is ignored even where it is a class index). Returns a new [N] tensor in
    float32 (float64 for float64 logits); half types are read as they are and accumulated in
    float32, under torch.autocast too. Differentiable in logits (the gradient in logits' dtype),
    as is torch.ops.custom_op.cross_entropy; works under torch.compile(fullgraph=True). A label
    out of range raises ValueError on the CPU; on CUDA it is not checked (no synchronization) and
    that row's loss and gradient are NaN.
    """
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral | torch.SymInt):
        raise TypeError(f"{PUBLIC}: argument 'ignore_index' must be an int, got {type(ignore_index).__name__}")
    if not isinstance(ignore_index, torch.SymInt):
        ignore_index = int(ignore_index)  # a NumPy integer, say
    return call(_ops.cross_entropy_forward.default, logits, labels, ignore_index)[0]
