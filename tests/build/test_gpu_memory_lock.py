"""Tests marked `large` or `gpu_memory` hold a lock shared by every pytest-xdist worker of the run,
and give their cached GPU memory back when they let it go."""

from __future__ import annotations

import fcntl

import pytest
from gpu_memory import one_at_a_time


def _lock_is_free(tmp_path_factory) -> bool:
    lock = tmp_path_factory.getbasetemp().parent / "gpu-memory.lock"
    with open(lock, "a") as other:  # another open file: flock conflicts with the fixture's
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other, fcntl.LOCK_UN)
        return True


@pytest.mark.gpu_memory
def test_a_gpu_memory_test_holds_the_lock(tmp_path_factory):
    assert not _lock_is_free(tmp_path_factory)


@pytest.mark.large
def test_a_large_test_holds_the_lock(tmp_path_factory):
    assert not _lock_is_free(tmp_path_factory)


@pytest.mark.gpu
def test_letting_go_returns_the_cached_gpu_memory(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    block = 2**28
    torch.cuda.empty_cache()  # a fresh segment for the block, not a piece of an earlier test's
    with one_at_a_time(tmp_path / "gpu-memory.lock"):
        x = torch.empty(block, dtype=torch.uint8, device="cuda")
        del x  # freed, but kept by the caching allocator
        cached = torch.cuda.memory_reserved()
    assert torch.cuda.memory_reserved() <= cached - block
