"""One GPU-memory-hungry test at a time across pytest-xdist workers, each leaving the GPU as it found it.

The lock alone is not enough: PyTorch's caching allocator keeps a finished test's blocks in its
worker, so the next worker's test could still run out of memory. The holder returns its cached
blocks to the device before it lets go.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import sys
from pathlib import Path


@contextlib.contextmanager
def one_at_a_time(lock: Path):
    """Holds an exclusive flock on `lock`; on release, frees this process's cached GPU memory."""
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            torch = sys.modules.get("torch")  # never imported here: tests/envs has no torch
            if torch is not None and torch.cuda.is_initialized():
                gc.collect()  # tensors in reference cycles of the test
                torch.cuda.empty_cache()
            fcntl.flock(held, fcntl.LOCK_UN)
