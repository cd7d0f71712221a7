"""What the benchmark is timing and how far it is: a rich progress bar on a terminal; elsewhere (a
log, CI) a plain line as each step starts and at least every EVERY_S seconds while one runs."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

EVERY_S = 10.0  # the longest a run stays silent off a terminal
EARLY_S = 1.0  # lines are due this much sooner: a busy machine may wake the thread late
PREFIX = "[bench]"  # marks the plain lines, so that `--runs N` passes its runs' lines on


def _clock_text(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


class Progress:
    """`with Progress("matrix", 12) as p: p.step("weighted_square forward float32 2^16")`, once a step.

    terminal: a rich bar (default: whether `out` is one). Off a terminal a background thread calls
    tick(); out, clock and background=False let a test drive it. quiet: nothing shown (the ranks of
    bench.parallel but the first)."""

    def __init__(
        self,
        part: str,
        total: int,
        *,
        out: TextIO | None = None,
        terminal: bool | None = None,
        every: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        background: bool = True,
        quiet: bool = False,
    ) -> None:
        self.part, self.total, self.out, self.clock, self.every = part, total, out or sys.stdout, clock, every
        self.terminal = self.out.isatty() if terminal is None else terminal
        self.background, self.quiet = background, quiet
        self.done, self.label = 0, ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None

    def __enter__(self) -> Progress:
        self.start = self.last_line = self.clock()
        if self.quiet:
            pass
        elif self.terminal:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=Console(file=self.out), transient=True,
            )  # fmt: skip
            self._bar.__enter__()
            self._task = self._bar.add_task(self.part, total=self.total)
        elif self.background:
            self._thread = threading.Thread(target=self._heartbeat, name="bench-progress", daemon=True)
            self._thread.start()
        return self

    def step(self, label: str) -> None:
        """A new step starts: what it times."""
        with self._lock:
            if self.label:
                self.done += 1
            self.label = label
            if self._bar is not None:
                self._bar.update(self._task, completed=self.done, description=f"{self.part}: {label}")
            else:
                self._line(f"{self.part} {self.done + 1}/{self.total}: {label}")

    def tick(self) -> None:
        """A line if none came for `every` seconds (the background thread calls it)."""
        with self._lock:
            if self._bar is None and self.clock() - self.last_line >= self.every - EARLY_S:
                self._line(f"{self.part} {self.done + 1}/{self.total}: still timing {self.label}")

    def _heartbeat(self) -> None:
        # Wakes when the next line is due; a step's own line moves that time on.
        while not self._stop.wait(max(0.05, self.last_line + self.every - EARLY_S - self.clock())):
            self.tick()

    def _line(self, text: str) -> None:
        if self.quiet:
            return
        now = self.clock()
        print(f"{PREFIX} {text} ({_clock_text(now - self.start)})", file=self.out, flush=True)
        self.last_line = now

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self.label:
                self.done += 1
            if self._bar is not None:
                self._bar.__exit__(*exc)
            elif exc[0] is None:
                self._line(f"{self.part}: {self.done} of {self.total} done")
