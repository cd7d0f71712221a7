"""Finds and loads the compiled library of an installed (or `pip install -e`) build."""

from __future__ import annotations

import importlib.util

import torch

NAMESPACE = "custom_op"

_BUILD_HINT = (
    "Build it with `pip install --no-build-isolation -e .` (or `nox -s build`) from a checkout, "
    "or compile the sources on the fly with `custom_op.jit.load()`."
)


class LibraryNotFoundError(ImportError):
    pass


_loaded_path: str | None = None


def load_installed() -> str:
    """Loads custom_op/_C*.so (once) and returns its path; its ops register under custom_op::."""
    global _loaded_path
    if _loaded_path is None:
        spec = importlib.util.find_spec("custom_op._C")
        if spec is None or spec.origin is None:
            raise LibraryNotFoundError("custom_op's compiled library (custom_op/_C) was not found. " + _BUILD_HINT)
        torch.ops.load_library(spec.origin)
        _loaded_path = spec.origin
    return _loaded_path
