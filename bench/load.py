"""The machine's load before and during a run, and which of the run's figures to trust.

Where the kernel's CPU counters can be read (/proc/stat), other processes' load over each interval
between readings is the CPU time every core spent busy less this process tree's: what ran beside
the run, not the load average's memory of what ran before it (a build that ended a minute ago).
Elsewhere, the 1-minute load average less this process tree's share of it (its CPU time per
second, averaged as the kernel averages the load)."""

from __future__ import annotations

import math
import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SPREAD_BOUND = 0.25  # a figure whose spread exceeds this is not to be trusted: differences within it are ties
BUSY_CORES = 0.5  # other processes' load above this: the machine was busy
EVERY_S = 5.0  # the kernel updates the load average every 5 s
BEFORE_S = 1.0  # the interval read before the run starts, where the CPU counters can be read
_AVERAGED_S = 60.0  # the 1-minute load average's time constant
MARK = "!"  # beside a figure whose spread exceeds SPREAD_BOUND
NAMED = 8  # figures named in the warning; the tables mark every one


@dataclass(frozen=True)
class Reading:
    when: float  # monotonic seconds
    load: float  # the 1-minute load average
    cores: int  # the cores this process may run on
    cpu_s: float  # CPU seconds of this process and its children so far
    busy_s: float | None = None  # CPU seconds all cores have spent busy since boot, where readable


def _busy_s() -> float | None:
    """/proc/stat's busy time of all cores: user, nice, system, irq, softirq and steal."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s() -> float:
    """CPU seconds of this process and every live descendant, with the children each has reaped
    (torch.compile's compile workers and compilers are other processes)."""
    tick, me = os.sysconf("SC_CLK_TCK"), os.getpid()
    parents, times = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while listed
            continue
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(f) for f in fields[11:15]) / tick  # utime, stime, cutime, cstime
    total = 0.0
    for pid in times:
        seen = pid
        while seen not in (me, 0, 1) and seen in parents:
            seen = parents[seen]
        total += times[pid] if seen == me else 0.0
    return total


def _own_cpu_s() -> float:
    if Path("/proc/self/stat").exists():
        return _tree_cpu_s()
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def read() -> Reading:
    return Reading(time.monotonic(), os.getloadavg()[0], usable_cores(), _own_cpu_s(), _busy_s())


def others_load(readings: list[Reading]) -> list[float]:
    """Other processes' load: over each interval between readings where every reading has the CPU
    counters, else at each reading from the load average."""
    if len(readings) > 1 and all(r.busy_s is not None for r in readings):
        kept = [readings[0]]
        for reading in readings[1:]:
            if reading.when - kept[-1].when >= BEFORE_S:  # intervals of a second at least: the counters tick
                kept.append(reading)  # every 10 ms
        return [
            max(0.0, (now.busy_s - before.busy_s - (now.cpu_s - before.cpu_s)) / (now.when - before.when))
            for before, now in zip(kept, kept[1:], strict=False)
        ] or [0.0]
    own, others = 0.0, []
    for before, now in zip([None, *readings], readings, strict=False):
        span = 0.0 if before is None else now.when - before.when
        if span > 0:
            decay = math.exp(-span / _AVERAGED_S)
            own = own * decay + (now.cpu_s - before.cpu_s) / span * (1 - decay)
        others.append(max(0.0, now.load - own))
    return others


class Watch:
    """`with Watch() as watch:` readings before, every EVERY_S during (a background thread) and
    after the run, in watch.readings. reader: injectable (default: read())."""

    def __init__(self, reader: Callable[[], Reading] | None = None, every: float | None = EVERY_S) -> None:
        self.reader, self.every = reader or read, every
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Watch:
        self.readings.append(self.reader())
        if self.readings[0].busy_s is not None:  # the first interval, before the run: what runs beside it
            time.sleep(BEFORE_S)
            self.readings.append(self.reader())
        if self.every is not None:
            self._thread = threading.Thread(target=self._sample, name="bench-load", daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.readings.append(self.reader())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.readings.append(self.reader())


def verdict(readings: list[Reading], threads: int) -> dict:
    """The run's load, for its report's context: other processes' load before the run and at its
    peak, the cores left free, torch's thread count, and whether the machine was busy."""
    others = others_load(readings)
    cores = min(r.cores for r in readings)
    peak = max(others)
    return {
        "cores": cores, "load_before": round(readings[0].load, 2), "others_before": round(others[0], 2),
        "others_peak": round(peak, 2), "free_cores": max(0, cores - round(peak)), "threads": threads,
        "busy": peak > BUSY_CORES, "readings": len(readings),
    }  # fmt: skip


def noisy(spread: float | None) -> bool:
    return spread is not None and spread > SPREAD_BOUND


def mark(spread: float | None) -> str:
    """A table's spread, as a percentage, marked where it exceeds the bound."""
    return "" if spread is None else f"{100 * spread:.0f}%" + (f" {MARK}" if noisy(spread) else "")


def untrusted(rows: list[dict], extras: dict) -> list[str]:
    """Each figure whose spread exceeds SPREAD_BOUND: '<case> <impl>[ view] (spread <spread>)'."""
    figures = []
    for part, rows_of_part in (("", rows), (" host time", extras.get("host_time", [])),
                               ("", extras.get("training", []))):  # fmt: skip
        for row in rows_of_part:
            for field, view in (("spread", part), ("gpu_spread", " GPU time")):
                if noisy(row.get(field)):
                    figures.append(f"{row['case']} {row['impl']}{view} (spread {100 * row[field]:.0f}%)")
    return figures


def before_run(readings: list[Reading]) -> str | None:
    """A line to print as the run starts, where the machine is busy already."""
    first = readings[0]
    others = others_load(readings[:2])[0] if first.busy_s is not None else first.load
    if others <= BUSY_CORES:
        return None
    what = f"other processes use {others:.1f} of" if first.busy_s is not None else f"load average {others:.1f} on"
    return (
        f"the machine is busy before the run: {what} {first.cores} cores; "
        "its timings will be slower and noisier than at rest"
    )


def warnings(load: dict, figures: list[str]) -> list[str]:
    """The lines at the top of the report: a busy machine, more threads than free cores, and the
    figures not to be trusted."""
    lines = []
    if load["busy"]:
        lines.append(
            f"the machine was busy: other processes' load peaked at {load['others_peak']:.1f} of "
            f"{load['cores']} cores ({load['others_before']:.1f} before the run). Every figure may be "
            "slower than at rest: compare within this run, or rerun at rest."
        )
    if load["threads"] > load["free_cores"]:
        lines.append(
            f"torch runs {load['threads']} threads with {load['free_cores']} of {load['cores']} cores free: "
            "a CPU kernel waits for its slowest thread, so CPU figures may be several times slower than "
            f"at rest. Set OMP_NUM_THREADS={max(1, load['free_cores'])} (torch.set_num_threads), or rerun at rest."
        )
    if figures:
        more = f"; and {len(figures) - NAMED} more" if len(figures) > NAMED else ""
        lines.append(
            f"{len(figures)} figures have a spread above {100 * SPREAD_BOUND:.0f}% (marked {MARK}) and are not "
            "to be trusted: " + "; ".join(figures[:NAMED]) + more + "."
        )
    return lines
