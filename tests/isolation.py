"""Runs tests marked `isolated` in a separate worker process, so that a crash fails that one test.

Bad input must raise, but a broken build can crash instead (a library with its own copy of the
C++ runtime died with SIGSEGV formatting an error message). In the worker, a crash ends only the
worker: the test fails naming the signal, and the next isolated test starts a fresh worker. The
worker is spawned, not forked: a fork of a process that has used CUDA cannot use CUDA.
"""

from __future__ import annotations

import importlib
import multiprocessing
import signal
import traceback

import pytest

TIMEOUT_S = 600


def _serve(connection) -> None:
    while True:
        request = connection.recv()
        if request is None:
            return
        module, name, kwargs = request
        try:
            getattr(importlib.import_module(module), name)(**kwargs)
            connection.send(("passed", ""))
        except pytest.skip.Exception as skip:
            connection.send(("skipped", str(skip)))
        except BaseException:  # everything goes back to the parent, which reports it
            connection.send(("failed", traceback.format_exc()))


class Worker:
    def __init__(self) -> None:
        self._process = None
        self._connection = None

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()

    def _lost(self) -> str:
        self._process.join(timeout=30)
        code = self._process.exitcode
        self._process = None
        if code is not None and code < 0:
            return f"the test crashed its process with {signal.Signals(-code).name} (signal {-code})"
        return f"the test's process ended with exit code {code}"

    def run(self, function, kwargs: dict) -> None:
        """Runs function(**kwargs) in the worker; fails, skips or returns as the test did there."""
        if self._process is None or not self._process.is_alive():
            self._start()
        self._connection.send((function.__module__, function.__name__, kwargs))
        if not self._connection.poll(TIMEOUT_S):
            self._process.kill()
            self._lost()
            pytest.fail(f"the test did not finish within {TIMEOUT_S} s (its process was killed)", pytrace=False)
        try:
            outcome, detail = self._connection.recv()
        except EOFError:
            outcome, detail = "crashed", self._lost()
        if outcome == "crashed":
            pytest.fail(detail, pytrace=False)
        if outcome == "skipped":
            pytest.skip(detail)
        if outcome == "failed":
            pytest.fail(f"in the isolated worker:\n{detail}", pytrace=False)

    def close(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._connection.send(None)
            self._process.join(timeout=30)
        self._process = None


WORKER = Worker()
