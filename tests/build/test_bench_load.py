"""Timings that warn: the machine's load read before and during a run (injected here, so that the
tests do not depend on this machine's), figures beyond the spread bound flagged, and the report
saying so at its top."""

from __future__ import annotations

import json
import math

import pytest

load = pytest.importorskip("bench.load", reason="run from the repository root")
report = pytest.importorskip("bench.report")


def readings(others, own_cores: float, cores: int = 2, seconds: int = 300) -> list:
    """A run's readings every 5 s: the kernel's 1-minute average of the others' load (a number, or
    one a second of the run) plus this process's `own_cores` of CPU from the run's start."""
    at = others if callable(others) else (lambda t: others)
    made, average, cpu, decay = [], at(0), 0.0, math.exp(-5 / 60)  # the others' load was there before
    for t in range(0, seconds + 1, 5):
        made.append(load.Reading(when=float(t), load=average, cores=cores, cpu_s=cpu))
        average = average * decay + (at(t) + own_cores) * (1 - decay)
        cpu += 5 * own_cores
    return made


def test_at_rest_the_processs_own_threads_are_not_a_busy_machine():
    verdict = load.verdict(readings(others=0.05, own_cores=2.0), threads=2)
    assert not verdict["busy"] and verdict["others_peak"] == pytest.approx(0.05, abs=0.05)
    assert verdict["free_cores"] == 2
    assert load.warnings(verdict, []) == []


def test_another_process_on_a_core_makes_a_busy_machine_and_too_many_threads():
    verdict = load.verdict(readings(others=1.0, own_cores=1.0), threads=2)
    assert verdict["busy"] and verdict["others_peak"] == pytest.approx(1.0, abs=0.05)
    assert verdict["free_cores"] == 1
    busy, threads = load.warnings(verdict, [])
    assert busy.startswith("the machine was busy: other processes' load peaked at 1.0 of 2 cores")
    assert threads.startswith("torch runs 2 threads with 1 of 2 cores free") and "OMP_NUM_THREADS=1" in threads


def test_a_load_that_comes_during_the_run_is_seen():
    verdict = load.verdict(readings(lambda t: 1.5 if t >= 60 else 0.0, own_cores=1.0), threads=1)
    assert verdict["others_before"] == 0.0 and verdict["busy"]
    assert verdict["others_peak"] == pytest.approx(1.5, abs=0.1)


def counted(others: float, own_cores: float, load_average: float, cores: int = 2, seconds: int = 60) -> list:
    """Readings every 5 s with the kernel's CPU counters: `others` cores busy beside the run, and a
    load average that still remembers `load_average` of work that ended before it."""
    return [
        load.Reading(
            when=float(t), load=load_average, cores=cores, cpu_s=t * own_cores, busy_s=t * (own_cores + others)
        )
        for t in range(0, seconds + 1, 5)
    ]


def test_work_that_ended_before_the_run_is_not_a_busy_machine():
    made = counted(others=0.0, own_cores=2.0, load_average=1.6)  # a test session ended a minute ago
    assert load.before_run(made) is None
    verdict = load.verdict(made, threads=2)
    assert not verdict["busy"] and verdict["free_cores"] == 2
    assert load.warnings(verdict, []) == []


def test_the_cpu_counters_see_another_process_on_a_core():
    made = counted(others=1.0, own_cores=1.0, load_average=0.0)
    assert "other processes use 1.0 of 2 cores" in load.before_run(made)
    verdict = load.verdict(made, threads=2)
    assert verdict["busy"] and verdict["others_peak"] == pytest.approx(1.0)
    assert verdict["free_cores"] == 1


def test_the_watch_reads_before_during_and_after():
    made = iter(readings(others=0.0, own_cores=1.0))
    with load.Watch(reader=lambda: next(made), every=0.01) as watch:
        assert len(watch.readings) >= 1
        while len(watch.readings) < 4:
            pass
    assert len(watch.readings) >= 5
    assert [r.when for r in watch.readings] == sorted(r.when for r in watch.readings)


def test_figures_beyond_the_spread_bound_are_flagged():
    bound = load.SPREAD_BOUND
    rows = [{"case": "c", "impl": "custom_op", "ms": 1.0, "spread": bound / 2, "gpu_ms": 0.5, "gpu_spread": 2 * bound},
            {"case": "c", "impl": "eager", "ms": 2.0, "spread": 2 * bound}]  # fmt: skip
    extras = {"host_time": [{"case": "h no grad", "impl": "custom_op", "us": 9.0, "spread": 4.1}]}
    figures = load.untrusted(rows, extras)
    assert figures == [f"c custom_op GPU time (spread {200 * bound:.0f}%)", f"c eager (spread {200 * bound:.0f}%)",
                       "h no grad custom_op host time (spread 410%)"]  # fmt: skip
    (line,) = load.warnings(load.verdict(readings(0.0, 1.0), threads=1), figures)
    assert line.startswith(f"3 figures have a spread above {100 * bound:.0f}% (marked !)")
    assert load.mark(4.1) == "410% !" and load.mark(bound) == f"{100 * bound:.0f}%"
    many = [f"case {i} (spread 50%)" for i in range(load.NAMED + 3)]
    (line,) = load.warnings(load.verdict(readings(0.0, 1.0), threads=1), many)
    assert line.endswith(f"case {load.NAMED - 1} (spread 50%); and 3 more.")


def test_the_reports_top_says_the_machine_was_busy_and_which_figures_not_to_trust(capsys):
    verdict = load.verdict(readings(others=1.2, own_cores=1.0), threads=2)
    host = [{"case": "h no grad", "impl": "custom_op", "us": 9.0, "spread": 4.1},
            {"case": "h no grad", "impl": "eager", "us": 3.0, "spread": 0.1}]  # fmt: skip
    figures = load.untrusted([], {"host_time": host})
    ctx = {"device": "d", "device_kind": "cpu", "torch": "t", "cuda": None, "git_revision": "r", "date": "now",
           "copy_gbps": 10.0, "load": verdict, "untrusted": figures, "warnings": load.warnings(verdict, figures)}  # fmt: skip
    text = report.markdown(ctx, [], {"host_time": host})
    top = text.splitlines()[:3]
    assert top[0].startswith("> **Warning:** the machine was busy")
    assert top[1].startswith("> **Warning:** torch runs 2 threads with 1 of 2 cores free")
    assert top[2].startswith("> **Warning:** 1 figures have a spread above") and "h no grad custom_op" in top[2]
    assert "| h no grad | 9.0 | 3.0 | 0.33x | 410% ! |" in text
    report.terminal_table(ctx, [], {"host_time": host})
    shown = capsys.readouterr().out
    assert shown.index("WARNING the machine was busy") < shown.index("host time")


@pytest.mark.slow  # a host-time part
def test_a_run_with_injected_readings_warns_in_every_output(tmp_path, monkeypatch, capsys):
    bench_main = pytest.importorskip("bench.__main__")
    cases = pytest.importorskip("bench.cases")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    busy = iter(readings(others=3.0, own_cores=1.0, seconds=3600))
    monkeypatch.setattr(load, "read", lambda: next(busy))
    op = sorted(cases.SPECS)[0]
    args = ["--quick", "--device", "cpu", "--op", op, "--part", "host-time", "--out", str(tmp_path)]
    assert bench_main.main(args) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("WARNING the machine is busy before the run: load average 3.0 on 2 cores")
    assert "WARNING the machine was busy: other processes' load peaked at 3.0 of 2 cores" in shown
    data = json.loads((tmp_path / "bench-cpu.json").read_text())
    assert data["context"]["load"]["busy"] and data["context"]["load"]["free_cores"] == 0
    assert data["context"]["spread_bound"] == load.SPREAD_BOUND
    assert data["context"]["warnings"][0].startswith("the machine was busy")
    assert (tmp_path / "bench-cpu.md").read_text().startswith("> **Warning:** the machine was busy")
