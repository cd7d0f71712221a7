"""Tests marked `large` or `gpu_memory` hold a lock shared by every pytest-xdist worker of the run."""

from __future__ import annotations

import fcntl

import pytest


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
