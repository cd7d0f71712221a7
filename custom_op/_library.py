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
    """No compiled library, or one that does not load here; `import custom_op` still works."""


_loaded_path: str | None = None


def load_installed() -> str:
    """Loads custom_op/_C*.so (once) and returns its path; its ops register under custom_op::."""
    global _loaded_path
    if _loaded_path is None:
        spec = importlib.util.find_spec("custom_op._C")
        if spec is None or spec.origin is None:
            raise LibraryNotFoundError("custom_op's compiled library (custom_op/_C) was not found. " + _BUILD_HINT)
        try:
            torch.ops.load_library(spec.origin)
        except OSError as error:
            raise LibraryNotFoundError(
                f"custom_op's compiled library {spec.origin} does not load under torch {torch.__version__}: "
                f"{error.__cause__ or error}. A library with CUDA kernels needs a CUDA build of torch; "
                "rebuild for this environment (CUSTOM_OP_CUDA=0 for CPU only). " + _BUILD_HINT
            ) from error
        _loaded_path = spec.origin
    return _loaded_path
