"""Hooks every test folder shares: the `device` and `dtype` parameters, the `gpu` marker, and the
`isolated` marker's worker process, a compiler that links libstdc++ statically. Nothing here imports torch until a test asks for a device or
a dtype (tests/envs runs in the tools venv, which has no torch)."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import sys

import pytest
from gpu_memory import one_at_a_time
from isolation import WORKER
from process_pool import ProcessPool


def _explicitly_parametrized(metafunc, name: str) -> bool:
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0]
        if name in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return True
    return False


def devices() -> list:
    """cpu, and cuda: run where a GPU is visible, otherwise collected and skipped with the reason."""
    import torch

    cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
    return ["cpu", pytest.param("cuda", marks=cuda)]


def dtypes() -> list:
    import torch

    return [pytest.param(d, id=str(d).removeprefix("torch.")) for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16)]  # fmt: skip


def pytest_generate_tests(metafunc):
    # `device` and `dtype` as parameters of every test that takes them (unless it names its own).
    for name, values in (("device", devices), ("dtype", dtypes)):
        if name in metafunc.fixturenames and not _explicitly_parametrized(metafunc, name):
            metafunc.parametrize(name, values())


@pytest.fixture
def deterministic_algorithms():
    """torch.use_deterministic_algorithms(True) for one test."""
    import torch

    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)


# Suites whose tests share an expensive fixture of the session or the module (a pool of processes, the
# exported package): under pytest-xdist (--dist loadgroup) each runs on one worker, which makes it once
# and keeps the other cores for the rest instead of several workers' pools oversubscribing them.
XDIST_GROUPS = ("multiprocess", "export")
_COLLECTED = pytest.StashKey[list]()
_GPU_DESELECTED = pytest.StashKey[int]()


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect, and before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    # Tests parametrized on the CUDA device are GPU tests too: `pytest -m gpu` selects them.
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("device") == "cuda":
            item.add_marker(pytest.mark.gpu)
        group = next((name for name in XDIST_GROUPS if item.get_closest_marker(name)), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if getattr(config.option, "loadgroup", False) and (marker := item.get_closest_marker("xdist_group")):
            _join_group(item, marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    config.stash[_COLLECTED] = list(items)
    # Without a GPU the GPU tests are deselected, not run to skip one by one (a third of the cases):
    # the header says so and the summary counts them. --collect-only still lists them.
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not config.option.collectonly and not _has_cuda():
        config.hook.pytest_deselected(items=gpu)
        items[:] = [item for item in items if not item.get_closest_marker("gpu")]
        config.stash[_GPU_DESELECTED] = len(gpu)
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker: its count goes to the controller's summary
            config.workeroutput["gpu_deselected"] = len(gpu)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    count = getattr(node, "workeroutput", {}).get("gpu_deselected", 0)
    node.config.stash[_GPU_DESELECTED] = max(node.config.stash.get(_GPU_DESELECTED, 0), count)


def _join_group(item, group: str) -> None:
    """What pytest-xdist's --dist loadgroup does to a test of an xdist_group (its scheduler sends every
    test whose id ends in "@group" to one worker): xdist 3.8 sets item._nodeid, which pytest 9 no
    longer reads, so each test would go to any worker."""
    if "@" in item.nodeid.rpartition("]")[2]:
        return
    if hasattr(item, "_id"):  # pytest 9
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(f"{item.nodeid}@{group}")
    else:
        item._nodeid = f"{item.nodeid}@{group}"


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="session")
def collected_tests(request) -> list:
    """Every test of the session as collected, before -k, -m or a missing GPU deselected any
    (tests/ops/test_coverage_matrix.py checks the suites' cases against it)."""
    return request.config.stash.get(_COLLECTED, [])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (nox -s test): a worker per core this process may use, at most 8 (each holds torch,
    and on a GPU a CUDA context); the multiprocess suites start their own processes on one of them."""
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    # Tests marked `isolated` (every bad-input case) run in a worker process: a crash fails that
    # test alone and names the signal, instead of ending the whole run.
    if pyfuncitem.get_closest_marker("isolated") is None:
        return None
    names = inspect.signature(pyfuncitem.obj).parameters
    WORKER.run(pyfuncitem.obj, {name: pyfuncitem.funcargs[name] for name in names})
    return True


def pytest_sessionfinish(session):
    WORKER.close()


@pytest.fixture(scope="session")
def process_pools():
    """process_pools(world): the session's pool of `world` processes of one torch.distributed group
    (process_pool.py), started at its first test and shared by the tests after it."""
    pools: dict[int, ProcessPool] = {}

    def pool(world: int) -> ProcessPool:
        return pools.setdefault(world, ProcessPool(world))

    yield pool
    for started in pools.values():
        started.close()


@pytest.fixture(autouse=True)
def _one_gpu_memory_test_at_a_time(request):
    """Tests marked `large` or `gpu_memory` take a lock that every pytest-xdist worker shares, so that
    sixteen of them do not ask one GPU for their gigabytes at once; other tests run beside them.
    Each returns its worker's cached GPU memory before the next one starts."""
    if not any(request.node.get_closest_marker(m) for m in ("large", "gpu_memory")):
        yield
        return
    # The workers' temporary folders share a parent (pytest-of-<user>/pytest-N).
    lock = request.getfixturevalue("tmp_path_factory").getbasetemp().parent / "gpu-memory.lock"
    with one_at_a_time(lock):
        yield


@pytest.fixture
def static_libstdcxx_compiler(tmp_path):
    """A C++ compiler that links libstdc++ statically, as relocated or module GCCs can: g++ plus
    -static-libstdc++, the way a CXX wrapper or inherited flags add it."""
    gxx = shutil.which("g++")
    if gxx is None or not sys.platform.startswith("linux"):
        pytest.skip("needs g++ on Linux")
    wrapper = tmp_path / "static-libstdcxx-g++"
    wrapper.write_text(f'#!/bin/sh\nexec {gxx} "$@" -static-libstdc++\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def pytest_report_header(config):
    # Said once, at the start, instead of a line per skipped test at the end.
    try:
        import torch
    except ImportError:  # tests/envs runs in the tools venv, which has no torch
        return None
    if torch.cuda.is_available():
        return f"CUDA GPU: {torch.cuda.get_device_name(0)} ({torch.cuda.device_count()} visible)"
    return "no CUDA GPU: the GPU tests (marked gpu, the CUDA cases among them) are deselected, counted at the end"


def pytest_terminal_summary(terminalreporter, config):
    deselected = config.stash.get(_GPU_DESELECTED, 0)
    if deselected:
        terminalreporter.line(
            f"{deselected} GPU tests deselected: no CUDA GPU, so the CUDA kernels were compiled, not run; they run where "
            "one is visible (the GPU workflow: docs/ci.md)"
        )
    # Skips counted by reason (pyproject's -r lists failures and errors only), a reason that differs
    # only by the op it names once, with the ops.
    reasons: dict[str, list[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason, op = _reason_and_op(reason.removeprefix("Skipped: "), report.nodeid)
        reasons.setdefault(reason, []).append(op)
    if reasons:
        terminalreporter.section("skipped, by reason")
        for reason, ops in sorted(reasons.items(), key=lambda item: -len(item[1])):
            named = sorted({op for op in ops if op})
            if len(named) == 1:
                reason = re.sub(r"\bOP\b", named[0], reason)
            terminalreporter.line(f"{len(ops):6d}  {reason}" + (f" ({', '.join(named)})" if len(named) > 1 else ""))


def _reason_and_op(reason: str, nodeid: str) -> tuple[str, str | None]:
    """The reason with the op it names (the test's first parameter) as OP, and the op."""
    params = re.search(r"\[([^\]]*)\]", nodeid)  # xdist's loadgroup adds "@group" after it
    op = params.group(1).split("-")[0] if params else ""
    if op and re.search(rf"\b{re.escape(op)}\b", reason):
        return re.sub(rf"\b{re.escape(op)}\b", "OP", reason), op
    return reason, None
