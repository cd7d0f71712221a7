"""How the public functions call their registered ops: shared by every operator's Python API."""

from __future__ import annotations

import re

import torch

from ._library import NAMESPACE

# The C++ checks throw std::invalid_argument, which torch 2.11-2.14 raise as ValueError; torch
# 2.15's stable ABI turns every C++ exception into RuntimeError. The API raises ValueError on all.
_BAD_INPUT = re.compile(rf"{NAMESPACE}::\w+: arguments? '")


def call(op, *args, **kwargs):
    """op(*args, **kwargs), with bad input raised as ValueError on every torch (the public API)."""
    if torch.compiler.is_compiling():  # traced: the fake kernels raise the ValueError themselves
        return op(*args, **kwargs)
    try:
        return op(*args, **kwargs)
    except RuntimeError as error:
        if _BAD_INPUT.match(str(error)):
            raise ValueError(str(error)) from None
        raise
