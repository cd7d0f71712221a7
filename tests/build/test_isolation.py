"""The isolated worker: a crash in a bad-input test fails that test, names the signal, and the next runs."""

from __future__ import annotations

import os
import signal

import pytest
from isolation import Worker


def crash_with(signal_number):
    os.kill(os.getpid(), signal_number)


def returns():
    pass


def raises():
    raise ValueError("custom_op::probe: a clear error")


@pytest.fixture
def worker():
    w = Worker()
    yield w
    w.close()


def test_a_crash_fails_the_test_with_the_signal_and_the_next_test_runs(worker):
    with pytest.raises(pytest.fail.Exception, match=r"crashed its process with SIGSEGV \(signal 11\)"):
        worker.run(crash_with, {"signal_number": signal.SIGSEGV})
    worker.run(returns, {})  # a fresh worker


def test_an_exception_fails_the_test_with_its_traceback(worker):
    with pytest.raises(pytest.fail.Exception, match=r"ValueError: custom_op::probe: a clear error"):
        worker.run(raises, {})
