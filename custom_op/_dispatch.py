"""How the public functions call their registered ops: shared by every operator's Python API."""

from __future__ import annotations

import re

import torch

from ._library import NAMESPACE

# The C++ checks throw std::invalid_argument, which torch 2.11-2.14 raise as ValueError; torch
# 2.15's stable ABI turns every C++ exception into RuntimeError. The API raises ValueError on all.
_BAD_INPUT = re.compile(rf"{NAMESPACE}::\w+: arguments? '")


def call(op, *args, **kwargs):
    """op(*args, **kwargs), with bad input raised as ValueError on every torch.

    Public API only: the call goes through the dispatcher's Autograd key like any op call, also
    when no input requires grad (docs/performance.md, Host time).
    """
    if torch.compiler.is_compiling():  # traced: the fake kernels raise the ValueError themselves
        return op(*args, **kwargs)
    try:
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
