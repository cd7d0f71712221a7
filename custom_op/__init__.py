"""custom_op: PyTorch operators in C++/CUDA on the LibTorch stable ABI.

    import custom_op
    y = custom_op.weighted_square(x, w)            # w * x**2
    s = custom_op.weighted_sum_of_squares(x, w)    # (w * x**2).sum(-1)

The same ops are registered as torch.ops.custom_op.weighted_square and
torch.ops.custom_op.weighted_sum_of_squares. Without a built library, `import custom_op` still
works so that custom_op.jit.load() can compile the sources.
"""

from . import _library, ops
from .ops import weighted_square, weighted_square_, weighted_sum_of_squares

try:
    LIBRARY_PATH: str | None = _library.load_installed()
except _library.LibraryNotFoundError as _error:
    LIBRARY_PATH = None
    _LOAD_ERROR = _error

    def _not_built(*args, **kwargs):
        raise _LOAD_ERROR

    weighted_square = weighted_square_ = weighted_sum_of_squares = _not_built  # noqa: F811
else:
    ops.register(_library.NAMESPACE)

__all__ = ["weighted_square", "weighted_square_", "weighted_sum_of_squares", "LIBRARY_PATH"]
__version__ = "0.1.0"
