"""Keep glibc's heap: no trimming, no mmap for big blocks (`python -m bench --keep-heap`).

PyTorch's CPU tensors come from malloc. With glibc's defaults, the memory of a freed output can
go back to the kernel (heap trimming, or munmap of a big block), and the next call's fresh
output faults its pages in again: on the 2-core CI machine that decided forward + backward at
2^20 elements (170-1500 minor faults per call, varying between processes) rather than the
kernels. Keeping the heap applies to every implementation in the run alike, as PyTorch's CPU
tuning advice to use a caching allocator (jemalloc, tcmalloc) would.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters, from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4


def keep_heap() -> None:
    """Freed memory stays in the process for reuse; raises where glibc's mallopt is unavailable."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        raise RuntimeError("--keep-heap needs glibc's mallopt (Linux)")
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # 2^31 - 1: the largest value the int parameter takes.
    if not (mallopt(M_TRIM_THRESHOLD, 2**31 - 1) and mallopt(M_MMAP_MAX, 0)):
        raise RuntimeError("--keep-heap: glibc's mallopt refused the settings")
