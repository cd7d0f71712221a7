"""Timers: CUDA events on the GPU, torch.utils.benchmark on the CPU; medians after warm-up.

On the GPU two views: back-to-back calls (what a loop of calls takes, host time included where
it exceeds the GPU's), and GPU time with the L2 flushed between calls (the kernels alone).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch
import torch.utils.benchmark


def spread(samples: list[float]) -> float:
    """Interquartile range over median: the run-to-run noise of one measurement."""
    q = statistics.quantiles(samples, n=4)
    return (q[2] - q[0]) / statistics.median(samples)


_FLUSH_BYTES = 256 * 2**20  # larger than any GPU's L2 (H200: 60 MB), as triton.testing.do_bench


def gpu_median_ms(
    fn: Callable[[], object], warmup: int = 10, reps: int = 50, flush_l2: bool = False
) -> tuple[float, float]:
    """Back-to-back calls timed by CUDA events; with flush_l2, a 256 MB buffer is cleared before
    each call: the L2 is cold, and the GPU stays busy while the host issues the call, so the
    events time the GPU's work, not the host's."""
    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda") if flush_l2 else None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        if flush is not None:
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


def median_ms(device: str, fn: Callable[[], object], quick: bool = False) -> tuple[float, float]:
    """(median milliseconds, relative spread) of fn."""
    if device == "cuda":
        return gpu_median_ms(fn, warmup=3 if quick else 10, reps=10 if quick else 50)
    return cpu_median_ms(fn, min_run_time=0.1 if quick else 0.5)


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
