"""The benchmark's progress: what it times and how far it is, and off a terminal a plain line at
least every progress.EVERY_S seconds."""

from __future__ import annotations

import io
import re
import time

import pytest

progress = pytest.importorskip("bench.progress", reason="run from the repository root")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Timestamped(io.StringIO):
    """An output that notes when each line came (time.monotonic)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def write(self, text: str) -> int:
        self.times += [time.monotonic()] * text.count("\n")
        return super().write(text)


def test_off_a_terminal_a_line_each_step_and_one_at_least_every_10_seconds():
    clock, out = FakeClock(), io.StringIO()
    came = []  # the fake time of each line
    with progress.Progress("matrix", 3, out=out, terminal=False, clock=clock, background=False) as shown:
        for label, seconds in (("case a", 3), ("case b", 35), ("case c", 1)):
            shown.step(label)
            came.append(clock.now)
            for _ in range(seconds * 2):  # a slow case: the clock moves on, the thread ticks
                clock.now += 0.5
                before = out.getvalue().count("\n")
                shown.tick()
                if out.getvalue().count("\n") > before:
                    came.append(clock.now)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[bench] matrix 1/3: case a (0:00)"
    assert lines[1] == "[bench] matrix 2/3: case b (0:03)"
    assert all(line.startswith("[bench] matrix 2/3: still timing case b (") for line in lines[2:5])
    assert lines[5] == "[bench] matrix 3/3: case c (0:38)"
    assert lines[-1] == "[bench] matrix: 3 of 3 done (0:39)"
    gaps = [b - a for a, b in zip(came, came[1:], strict=False)]
    assert max(gaps) <= progress.EVERY_S
    assert min(g for g in gaps[1:4]) >= progress.EVERY_S - progress.EARLY_S - 0.1  # not more often than needed


def test_the_background_thread_speaks_while_a_step_runs(monkeypatch):
    monkeypatch.setattr(progress, "EARLY_S", 0.0)
    out = Timestamped()
    start = time.monotonic()
    with progress.Progress("training", 1, out=out, terminal=False, every=0.2) as shown:
        shown.step("one slow step")
        time.sleep(1.0)
    times = [start, *out.times]
    assert len(re.findall("still timing one slow step", out.getvalue())) >= 3
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < 0.2 + 0.15  # scheduling's slack


def test_on_a_terminal_a_bar_and_no_plain_lines():
    out = io.StringIO()
    with progress.Progress("host time", 2, out=out, terminal=True) as shown:
        shown.step("op no grad")
        shown.step("op forward+backward")
    assert progress.PREFIX not in out.getvalue()


def test_quiet_shows_nothing():
    out = io.StringIO()
    with progress.Progress("parallel", 2, out=out, terminal=False, quiet=True) as shown:
        shown.step("tp_sp")
    assert out.getvalue() == ""


@pytest.mark.slow  # a host-time part
def test_the_host_time_part_reports_its_cases_in_a_log(capsys):
    host_time = pytest.importorskip("bench.host_time")
    cases = pytest.importorskip("bench.cases")
    op = sorted(cases.SPECS)[0]
    host_time.measure("cpu", True, [op])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(progress.PREFIX)]
    assert lines[0].startswith(f"[bench] host time 1/2: {op} no grad (")
    assert lines[1].startswith(f"[bench] host time 2/2: {op} forward+backward (")
    assert lines[-1].startswith("[bench] host time: 2 of 2 done (")
