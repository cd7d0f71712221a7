"""How an operator's Python API attaches autograd: a torch.autograd.Function around the op,
entered only when a gradient is needed. The registered op itself has no autograd kernel, so a
call that needs no gradient pays no Python at the dispatcher's Autograd key (register_autograd
puts one there for every call). The Functions define forward(ctx, ...) without setup_context:
with setup_context, Function.apply binds default arguments through inspect.signature on every
call. Measured in docs/performance.md, Host time."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

import torch

from ._dispatch import call


def needs_grad(*args) -> bool:
    """Whether a call with these arguments records a graph: grad mode on and a tensor requiring grad."""
    if not torch.is_grad_enabled():
        return False
    for a in args:  # noqa: SIM110 (a loop: a third of any() over a generator, paid on every call)
        if isinstance(a, torch.Tensor) and a.requires_grad:
            return True
    return False


def differentiable(op, function: type[torch.autograd.Function], autocast_to: torch.dtype | None = None) -> Callable:
    """op(*args), through `function` (whose forward calls op) when a gradient is needed.

    autocast_to: the dtype the op's register_autocast casts to. With a gradient the cast happens
    here, before `function`, so that it saves the inputs the kernel sees and the cast's own
    backward returns the gradients in the inputs' dtypes (as for an autograd kernel, which runs
    after the Autocast key).
    """

    def apply(*args):
        if not needs_grad(*args):
            return call(op, *args)
        if autocast_to is not None:
            args = _autocast(args, autocast_to)
        return call(function.apply, *args)

    return apply


def _autocast(args: tuple, dtype: torch.dtype) -> tuple:
    # The first tensor's device is the call's; is_cuda before .device.type, which is dearer.
    first = next(a for a in args if isinstance(a, torch.Tensor))
    if not torch.is_autocast_enabled("cuda" if first.is_cuda else first.device.type):
        return args
    return tuple(
        a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype != torch.float64 else a
        for a in args
    )


def once_differentiable(public: str, backward_op) -> Callable:
    """backward_op, which the forward's backward calls; differentiating it again (a gradient of a
    gradient, create_graph=True) is a clear error instead of a wrong answer."""

    class Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            return backward_op(*args)

        @staticmethod
        def backward(ctx, *grads):
            raise RuntimeError(
                f"{public}: double backward (a gradient of its gradient) is not supported; "
                "compute the second derivative another way, e.g. with eager PyTorch ops"
            )

    def run(*args):
        return Backward.apply(*args) if needs_grad(*args) else backward_op(*args)

    return run


def refuse_backward_through_kernels(namespace: str) -> None:
    """A backward through torch.ops.<namespace>.<op> itself (the kernel, without the autograd its
    Python function adds) raises instead of PyTorch's default, a warning and a missing gradient."""
    warnings.filterwarnings(
        "error", message=rf"{re.escape(namespace)}::\w+: an autograd kernel was not registered", category=UserWarning
    )
