"""The process pool of the multi-process tests: every rank runs the function and answers; a failing,
crashing or skipping rank is reported as such, and the next test gets a fresh pool."""

from __future__ import annotations

import os
import signal

import pytest
import torch.distributed as dist
from process_pool import ProcessPool

pytestmark = pytest.mark.multiprocess


def rank_and_sum() -> tuple[int, float]:
    import torch

    total = torch.ones(1)
    dist.all_reduce(total)  # the ranks form one group
    return dist.get_rank(), total.item()


def rank_one_raises() -> None:
    if dist.get_rank() == 1:
        raise ValueError("a clear error")


def rank_one_crashes() -> None:
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGSEGV)


def skips() -> None:
    pytest.skip("not here")


@pytest.fixture(scope="module")
def pool():
    started = ProcessPool(2)
    yield started
    started.close()


def test_every_rank_answers_in_one_group(pool):
    assert pool.run(rank_and_sum) == [(0, 2.0), (1, 2.0)]


def test_a_failing_rank_fails_the_test_with_its_traceback_and_the_next_test_runs(pool):
    with pytest.raises(pytest.fail.Exception, match=r"rank 1 of 2: Traceback(.|\n)*ValueError: a clear error"):
        pool.run(rank_one_raises)
    assert pool.run(rank_and_sum) == [(0, 2.0), (1, 2.0)]  # a fresh pool


def test_a_crashing_rank_fails_the_test_with_the_signal(pool):
    with pytest.raises(pytest.fail.Exception, match=r"rank 1 of 2: the process ended with SIGSEGV \(signal 11\)"):
        pool.run(rank_one_crashes)
    assert pool.run(rank_and_sum) == [(0, 2.0), (1, 2.0)]


def test_skipping_ranks_skip_the_test(pool):
    with pytest.raises(pytest.skip.Exception, match="not here"):
        pool.run(skips)
