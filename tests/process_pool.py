"""Processes that form one torch.distributed process group, started once per world size and shared by
every test that needs them (tests marked `multiprocess`): a test sends a function by name and its
arguments, every rank runs it, and the test gets each rank's result, or fails with every rank's error.

The backend is NCCL, one GPU a rank, where as many GPUs are visible, and gloo on the CPU otherwise
(`device()` says which, in a rank). The processes are spawned, not forked: a fork of a process that
has used CUDA cannot use CUDA. A failed test restarts the pool: ranks that failed apart may be left
in different collectives.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import os
import shutil
import signal
import tempfile
import time
import traceback
from datetime import timedelta

import pytest

TIMEOUT_S = 600  # a test's wait for every rank's answer
COLLECTIVE_TIMEOUT_S = 300  # a rank waiting for the others in a collective raises after this

_device = "cpu"  # in a rank: where its tensors live


def backend_for(world: int) -> str:
    import torch

    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world else "gloo"


def device() -> str:
    """In a rank: "cuda" (NCCL, the rank's own GPU current) or "cpu" (gloo)."""
    return _device


@functools.cache
def mesh(shape: tuple[int, ...], names: tuple[str, ...] | None = None):
    """In a rank: a DeviceMesh over every rank of the pool, made once (a mesh of several dimensions
    makes a process group per dimension)."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(_device, shape, mesh_dim_names=names)


def _serve(rank: int, world: int, backend: str, init_file: str, connection) -> None:
    global _device
    import torch
    import torch.distributed as dist

    if backend == "nccl":
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        torch.cuda.set_device(rank)
        _device = "cuda"
    else:
        torch.set_num_threads(1)  # the ranks share the machine's cores; their tensors are small
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))  # fmt: skip
    try:
        while (request := connection.recv()) is not None:
            module, name, args = request
            try:
                connection.send(("passed", getattr(importlib.import_module(module), name)(*args)))
            except pytest.skip.Exception as skip:
                connection.send(("skipped", str(skip)))
            except BaseException:  # everything goes back to the test, which reports it
                connection.send(("failed", traceback.format_exc()))
    finally:
        gc.collect()  # the tests' pending gloo work, freed while the interpreter is whole (bench/parallel.py's reason)
        dist.destroy_process_group()


class ProcessPool:
    def __init__(self, world: int) -> None:
        self.world = world
        self.backend = backend_for(world)
        self._ranks: list = []  # (process, connection) per rank
        self._folder = None

    def _start(self) -> None:
        import torch.multiprocessing as mp

        context = mp.get_context("spawn")
        self._folder = tempfile.mkdtemp(prefix=f"process-pool-{self.world}-")
        init_file = os.path.join(self._folder, "init")
        for rank in range(self.world):
            connection, child = context.Pipe()
            process = context.Process(target=_serve, args=(rank, self.world, self.backend, init_file, child),
                                      daemon=True)  # fmt: skip
            process.start()
            child.close()
            self._ranks.append((process, connection))

    def _answer(self, process, connection, deadline: float) -> tuple[str, object]:
        if not connection.poll(max(0.0, deadline - time.monotonic())):
            return "lost", f"no answer within {TIMEOUT_S} s"
        try:
            return connection.recv()
        except EOFError:
            process.join(timeout=30)
            code = process.exitcode
            if code is not None and code < 0:
                return "lost", f"the process ended with {signal.Signals(-code).name} (signal {-code})"
            return "lost", f"the process ended with exit code {code}"

    def run(self, function, *args) -> list:
        """function(*args) in every rank (a module-level function, found there by its module and
        name); returns each rank's result, skips if the ranks skipped, fails if any failed."""
        if not self._ranks or not all(process.is_alive() for process, _ in self._ranks):
            self.close()
            self._start()
        for _, connection in self._ranks:
            connection.send((function.__module__, function.__name__, args))
        deadline = time.monotonic() + TIMEOUT_S
        answers = [self._answer(process, connection, deadline) for process, connection in self._ranks]
        failed = [f"rank {rank} of {self.world}: {detail}" for rank, (outcome, detail) in enumerate(answers)
                  if outcome in ("failed", "lost")]  # fmt: skip
        if failed:
            self.close(kill=True)  # a fresh pool for the next test
            pytest.fail(f"in the {self.world}-process pool ({self.backend}):\n" + "\n".join(failed), pytrace=False)
        skipped = [str(detail) for outcome, detail in answers if outcome == "skipped"]
        if skipped:
            if len(skipped) < self.world:
                pytest.fail(f"some ranks skipped, the others did not: {skipped[0]}", pytrace=False)
            pytest.skip(skipped[0])
        return [detail for _, detail in answers]

    def close(self, kill: bool = False) -> None:
        for process, connection in self._ranks:
            if kill:
                process.kill()
            elif process.is_alive():
                with contextlib.suppress(OSError):  # the rank is gone: joined below
                    connection.send(None)
        for process, _ in self._ranks:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
                process.join()
        self._ranks = []
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
