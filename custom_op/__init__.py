"""custom_op: PyTorch operators in C++/CUDA on the LibTorch stable ABI.

    import custom_op
    y = custom_op.<name>(x, ...)            # an operator's public function
    y = torch.ops.custom_op.<name>(x, ...)  # the same operator, registered with PyTorch

Every operator lives in custom_op/ops/<name>/ and is exported here by name (the names in its
__all__); the template ships two examples there (README.md). Without a built library, `import custom_op` still works so
that custom_op.jit.load() can compile the sources.
"""

from . import _library, ops

_PUBLIC = ops.public_functions()

try:
    # Every library loaded (the CPU library, then the CUDA library under a CUDA torch), and the first.
    LIBRARY_PATHS: tuple[str, ...] = tuple(_library.load_installed())
    LIBRARY_PATH: str | None = LIBRARY_PATHS[0]
except _library.LibraryNotFoundError as _error:
    LIBRARY_PATHS, LIBRARY_PATH = (), None
    _LOAD_ERROR = _error

    def _not_built(*args, **kwargs):
        raise _LOAD_ERROR

    _PUBLIC = dict.fromkeys(_PUBLIC, _not_built)
else:
    ops.register(_library.NAMESPACE)

globals().update(_PUBLIC)
__all__ = [*_PUBLIC, "LIBRARY_PATH", "LIBRARY_PATHS"]
__version__ = "0.1.0"
