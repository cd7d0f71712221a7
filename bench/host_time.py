"""Host time per call: each operator on a tiny input, so that the GPU's work is negligible and the
time is what the host spends issuing the call (Python, the dispatcher, autograd), next to eager
PyTorch's, without grad and forward + backward. Implementations alternate within each repeat,
so that drifts of the machine fall on all of them alike."""

from __future__ import annotations

import statistics
import time

import torch

from . import cases, progress, timing

TINY_SHAPE = (2, 8)  # a 2-D x fits every kind of op (a row-wise one needs a last dimension)
MODES = {"forward": "no grad", "forward+backward": "forward+backward"}


def _per_call_us(fn, calls: int, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def interleaved_us(fns: dict, device: str, calls: int, repeats: int) -> dict[str, tuple[float, float]]:
    """{name: (median us per call, spread)} over `repeats` rounds, each timing every fn in turn."""
    for fn in fns.values():  # warm-up: first-call costs
        _per_call_us(fn, max(10, calls // 10), device)
    samples = timing.interleaved(fns, lambda fn: _per_call_us(fn, calls, device), repeats)
    return {name: (statistics.median(values), timing.spread(values)) for name, values in samples.items()}


def measure(device: str, quick: bool, ops: list[str] | None = None) -> list[dict]:
    calls, repeats = (200, 5) if quick else (2000, 11)
    rows = []
    specs = [spec for spec in cases.SPECS.values() if not ops or spec.name in ops]
    with progress.Progress("host time", len(specs) * len(MODES)) as shown:
        for spec in specs:
            for mode, label in MODES.items():
                shown.step(f"{spec.name} {label}")
                rows += _case(spec, mode, label, device, calls, repeats)
    return rows


def _case(spec, mode: str, label: str, device: str, calls: int, repeats: int) -> list[dict]:
    """The op and its baseline on the tiny input, in one mode: a row each."""
    case = cases.Case(spec.name, mode, torch.float32, TINY_SHAPE)
    sample = case.sample(device)
    impls = {"custom_op": spec.function} | ({"eager": spec.baseline} if spec.baseline else {})
    fns = {name: cases.runner(case, impl, sample) for name, impl in impls.items()}
    return [
        {"case": f"{spec.name} {label}", "op": spec.name, "mode": label, "impl": name, "us": us,
         "spread": round(spread, 4)}
        for name, (us, spread) in interleaved_us(fns, device, calls, repeats).items()
    ]  # fmt: skip
