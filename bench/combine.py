"""Medians over several runs of the benchmark, each in its own process.

On a GPU the same case can differ between processes by more than its spread within one process
(an H200 ran one bf16 reduction at 78% to 93% of the copy bandwidth over four runs, each run's
own spread under 1.5%), so a comparison worth trusting takes several runs. Each row's spread
becomes the larger of its in-run spread and the range across runs over their median.
"""

from __future__ import annotations

import statistics


def combine(results: list[dict]) -> tuple[dict, list[dict]]:
    """(context, rows) of several runs' JSON results, as one run's would be."""
    if not results:
        raise ValueError("bench.combine: no runs to combine")
    ctx = dict(results[0]["context"])
    ctx["copy_gbps"] = round(statistics.median(r["context"]["copy_gbps"] for r in results), 1)
    ctx["runs"] = len(results)
    groups: dict[tuple[str, str], list[dict]] = {}
    for result in results:
        for row in result["rows"]:
            groups.setdefault((row["case"], row["impl"]), []).append(row)
    rows = []
    for runs in groups.values():
        ms, spread = _median_and_spread(runs, "ms", "spread")
        nbytes = runs[0]["gbps"] * runs[0]["ms"] * 1e6  # the bytes that must move, as counted
        gbps = nbytes / ms / 1e6
        row = {k: v for k, v in runs[0].items() if not k.startswith("speedup")}  # recomputed from the medians
        row.update(ms=ms, gbps=gbps, pct_copy=100 * gbps / ctx["copy_gbps"], spread=spread, runs=len(runs))
        if "gpu_ms" in row:  # the second view, combined the same way
            gpu_ms, gpu_spread = _median_and_spread(runs, "gpu_ms", "gpu_spread")
            row.update(
                gpu_ms=gpu_ms, gpu_spread=gpu_spread, gpu_pct_copy=100 * nbytes / gpu_ms / 1e6 / ctx["copy_gbps"]
            )
        rows.append(row)
    return ctx, rows


# The parts beside the matrix, and the time each of their rows gives.
EXTRAS = {"host_time": "us", "training": "ms"}


def extras(results: list[dict]) -> dict[str, list[dict]]:
    """The host-time and training-step rows of several runs: medians, with the range as spread."""
    combined = {}
    for part, field in EXTRAS.items():
        groups: dict[tuple[str, str], list[dict]] = {}
        for result in results:
            for row in result.get(part, []):
                groups.setdefault((row["case"], row["impl"]), []).append(row)
        rows = []
        for runs in groups.values():
            middle, spread = _median_and_spread(runs, field, "spread")
            row = {**runs[0], field: middle, "spread": spread, "runs": len(runs)}
            if "gpu_ms" in row:
                row["gpu_ms"], row["gpu_spread"] = _median_and_spread(runs, "gpu_ms", "gpu_spread")
            rows.append(row)
        combined[part] = rows
    return combined


def _median_and_spread(runs: list[dict], field: str, spread_field: str) -> tuple[float, float]:
    """The median of one field over runs, and the larger of its in-run spread and range across runs."""
    times = [r[field] for r in runs]
    middle = statistics.median(times)
    across = (max(times) - min(times)) / middle
    return middle, round(max(across, *(r[spread_field] for r in runs)), 4)
