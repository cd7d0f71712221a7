"""How the public functions call their registered ops: shared by every operator's Python API."""

from __future__ import annotations

import numbers
import re

import torch

from ._library import NAMESPACE

# The C++ checks throw std::invalid_argument, which torch 2.11-2.14 raise as ValueError; torch
# 2.15's stable ABI turns every C++ exception into RuntimeError. The API raises ValueError on all.
_BAD_INPUT = re.compile(rf"{NAMESPACE}::\w+: arguments? '")


def needs_autograd(*values) -> bool:
    """Whether a tensor among `values` requires grad; True also for anything that is neither a
    tensor nor a plain scalar (an fx Proxy, a wrong type), which the op's full path handles."""
    for value in values:
        if isinstance(value, torch.Tensor):
            if value.requires_grad:
                return True
        elif not (value is None or isinstance(value, numbers.Number | bool)):
            return True
    return False


def call(op, *args, **kwargs):
    """op(*args, **kwargs), dispatched below its Python Autograd kernel when no gradient is needed.

    That kernel (register_autograd's) does nothing then, yet costs as much host time as the
    compiled kernel's own dispatch. torch.compile traces the op itself, and any input that
    requires grad takes the op's full path.
    """
    if torch.compiler.is_compiling():  # traced: the fake kernels raise the ValueError themselves
        return op(*args, **kwargs)
    try:
        if torch.is_grad_enabled() and needs_autograd(*args, *kwargs.values()):
            return op(*args, **kwargs)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args, **kwargs)
    except RuntimeError as error:
        if _BAD_INPUT.match(str(error)):
            raise ValueError(str(error)) from None
        raise


def no_double_backward(public: str):
    """A backward for register_autograd on a backward op: a clear error instead of a wrong answer."""

    def backward(ctx, *grads):
        raise RuntimeError(
            f"{public}: double backward (a gradient of its gradient) is not supported; "
            "compute the second derivative another way, e.g. with eager PyTorch ops"
        )

    return backward
