"""Timers: CUDA events on the GPU, torch.utils.benchmark on the CPU; medians after warm-up.

On the GPU two views: back-to-back calls (what a loop of calls takes, host time included where
it exceeds the GPU's), and GPU time with the L2 flushed between calls (the kernels alone).
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
from collections.abc import Callable, Iterator

import torch

from custom_op import build_config

build_config.cpp_extension()  # torch.utils.benchmark imports it: without its no-GPU warning
import torch.utils.benchmark  # noqa: E402


def spread(samples: list[float]) -> float:
    """Interquartile range over median: the run-to-run noise of one measurement."""
    q = statistics.quantiles(samples, n=4)
    return (q[2] - q[0]) / statistics.median(samples)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off while timing, as timeit (and so torch.utils.benchmark)
    does: a collection's pause lands on whichever call happens to trigger it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def interleaved(fns: dict, measure: Callable[[Callable[[], object]], object], rounds: int) -> dict[object, list]:
    """{name: [measure(fn) of each round]}: every fn measured once a round, in turn, so that a
    drift of the machine falls on all of them alike; the garbage collector off throughout."""
    samples: dict[object, list] = {name: [] for name in fns}
    with no_gc():
        for _ in range(rounds):
            for name, fn in fns.items():
                samples[name].append(measure(fn))
    return samples


def interleaved_medians(
    fns: dict, timer: Callable[[Callable[[], object]], tuple[float, float]], rounds: int
) -> dict[object, tuple[float, float]]:
    """{name: (median, spread)} of fns timed in interleaved rounds, timer(fn) giving one round's
    (median, spread): the median over rounds, and the larger of the spread across rounds and the
    median spread within one."""
    samples = interleaved(fns, timer, rounds)
    combined = {}
    for name, timed in samples.items():
        medians = [m for m, _ in timed]
        within = statistics.median(s for _, s in timed)
        combined[name] = (statistics.median(medians), max(spread(medians), within))
    return combined


_FLUSH_BYTES = 256 * 2**20  # larger than any GPU's L2 (H200: 60 MB), as triton.testing.do_bench


def host_ms(fn: Callable[[], object], calls: int = 5) -> float:
    """The host's time to issue one call, waiting for none of its GPU work: the slowest of `calls`."""
    torch.cuda.synchronize()
    issued = []
    with no_gc():
        for _ in range(calls):
            start = time.perf_counter()
            fn()
            issued.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize()
    return max(issued)


def clears_for(fn: Callable[[], object]) -> int:
    """How many clears of the flush buffer outlast twice fn's host time (gpu_median_ms, flush_l2)."""
    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    clear_ms, _ = gpu_median_ms(flush.zero_, warmup=2, reps=5)
    return max(1, math.ceil(2 * host_ms(fn) / clear_ms))


def gpu_median_ms(
    fn: Callable[[], object], warmup: int = 10, reps: int = 50, flush_l2: bool = False, clears: int | None = None
) -> tuple[float, float]:
    """Back-to-back calls timed by CUDA events; with flush_l2, a 256 MB buffer is cleared before
    each call, as often as it takes to outlast twice the call's host time: the L2 is cold, and
    the GPU is still busy when the host has issued the whole call, so the events time the GPU's
    work alone (one clear, as triton.testing.do_bench does, leaves the GPU idle while a call
    slower on the host than the clear is issued, and times that too). `clears`: their number, where
    processes that wait on each other must agree on it (default: clears_for(fn))."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    flush = None
    if flush_l2:
        clears = clears_for(fn) if clears is None else clears
        flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    else:
        clears = 0
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    with no_gc():
        for start, end in zip(starts, ends, strict=True):
            for _ in range(clears):
                flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
    samples = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    return statistics.median(samples), spread(samples)


def cpu_median_ms(fn: Callable[[], object], min_run_time: float = 0.5) -> tuple[float, float]:
    fn()  # warm-up (first-call costs, compilation)
    timer = torch.utils.benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    spread = measurement.iqr / measurement.median if len(measurement.times) >= 4 else 0.0
    return measurement.median * 1e3, spread


def median_ms(device: str, fn: Callable[[], object], quick: bool = False, rounds: int = 1) -> tuple[float, float]:
    """(median milliseconds, relative spread) of fn; rounds: one of that many rounds, each with
    that share of the calls."""
    if device == "cuda":
        warmup, reps = (3, 10) if quick else (10, 50)
        return gpu_median_ms(fn, warmup=max(2, warmup // rounds), reps=max(5, reps // rounds))
    return cpu_median_ms(fn, min_run_time=(0.1 if quick else 0.5) / rounds)


def copy_bandwidth_gbps(device: str, quick: bool = False) -> float:
    """The ceiling: a large device copy, counting bytes read plus bytes written."""
    numel = 2**24 if device == "cpu" or quick else 2**28
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    ms, _ = median_ms(device, lambda: dst.copy_(src), quick)
    return 2 * src.numel() * src.element_size() / ms / 1e6


def peak_extra_mb(device: str, fn: Callable[[], object]) -> float | None:
    """Device memory one call allocates beyond what was in use before it (CUDA only)."""
    if device != "cuda":
        return None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20
