"""Autograd on the registered ops, the way PyTorch documents it (torch.library.register_autograd):
torch.ops.<namespace>.<op> itself is differentiable, in eager, under torch.compile and in CUDA
graphs, and the public functions are thin wrappers around it. Nothing here changes the user's
process (no warning filters, no global flags)."""

from __future__ import annotations

import torch


def needs_grad(*args) -> bool:
    """Whether a call with these arguments records a graph: grad mode on and a tensor requiring grad."""
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def refuse_grad(public: str, label: str, instead: str, *tensors) -> None:
    """No gradient flows through a result written into existing memory (out=, in place): say so
    instead of silently dropping it, as PyTorch does for in-place ops on leaves that require grad."""
    if needs_grad(*tensors):
        raise RuntimeError(
            f"{public}: {label} writes into existing memory and is not differentiable, but an input requires "
            f"grad; use {instead} for gradients, or call it under torch.no_grad()"
        )


class _RefuseDoubleBackward(torch.autograd.Function):
    """A backward op's call under create_graph=True: its result carries a node whose backward raises."""

    @staticmethod
    def forward(ctx, public, op, *args):
        ctx.public = public
        return op(*args)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            f"{ctx.public}: double backward (a gradient of its gradient) is not supported; "
            "compute the second derivative another way, e.g. with eager PyTorch ops"
        )


def call_backward(public: str, op, *args):
    """op(*args) for a forward op's backward to call its backward op. The backward op has no autograd
    kernel of its own, so a plain backward (grad mode off) reaches its kernel with no Python in
    between; under create_graph=True (grad mode on) the result carries a node that makes a gradient
    of the gradient a clear error instead of PyTorch's default, a warning and no gradient."""
    if not torch.is_grad_enabled():
        return op(*args)
    return _RefuseDoubleBackward.apply(public, op, *args)
