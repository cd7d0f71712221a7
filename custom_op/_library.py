"""Finds and loads the compiled libraries of an installed (or `pip install -e`) build: the CPU
library (the schemas and the CPU kernels) always, and the CUDA library, where the build made one,
only under a torch built with CUDA (12 or 13: it carries its own CUDA runtime)."""

from __future__ import annotations

import importlib.util

import torch

from . import build_config

NAMESPACE = "custom_op"

_BUILD_HINT = (
    "Build it with `pip install --no-build-isolation -e .` (or `nox -s build`) from a checkout, "
    "or compile the sources on the fly with `custom_op.jit.load()`."
)


class LibraryNotFoundError(ImportError):
    """No compiled library, or one that does not load here; `import custom_op` still works."""


def to_load(torch_cuda: str | None, has_cuda_library: bool) -> list[str]:
    """The libraries (modules of the package) to load, in order, under a torch whose
    `torch.version.cuda` is `torch_cuda`."""
    libraries = [build_config.CPU_LIBRARY]
    if torch_cuda is not None and has_cuda_library:
        libraries.append(build_config.CUDA_LIBRARY)
    return libraries


def _find(module: str) -> str | None:
    spec = importlib.util.find_spec(f"{__package__}.{module}")
    return spec.origin if spec is not None else None


_loaded_paths: list[str] = []


def load_installed() -> list[str]:
    """Loads the libraries (once) and returns their paths, the CPU library's first; their ops
    register under custom_op::."""
    if _loaded_paths:
        return list(_loaded_paths)
    if _find(build_config.CPU_LIBRARY) is None:
        raise LibraryNotFoundError(
            f"custom_op's compiled library (custom_op/{build_config.CPU_LIBRARY}) was not found. " + _BUILD_HINT
        )
    has_cuda_library = _find(build_config.CUDA_LIBRARY) is not None
    paths = [_find(module) for module in to_load(torch.version.cuda, has_cuda_library)]
    for path in paths:
        try:
            torch.ops.load_library(path)
        except OSError as error:
            raise LibraryNotFoundError(
                f"custom_op's compiled library {path} does not load under torch {torch.__version__}: "
                f"{error.__cause__ or error}. Rebuild for this environment. " + _BUILD_HINT
            ) from error
    _loaded_paths.extend(paths)
    return list(paths)
