"""The build's output, a line per compiled file: `python tools/build_log.py [--verbose] -- COMMAND...`.

torch's extension builder runs ninja with -v, which prints each compiler command line whole (some
1,700 characters). This runs the build, prints `[k/N] compiling <file>` for each of those and every
other line as it comes (the build's own messages, compiler warnings and errors, a failed file's
command), keeps the whole output in build/build.log, and on a failure names the files that did not
compile. A Python traceback shows as its last line (setuptools' and ninja's frames say nothing a
compiler error has not); the log keeps it whole. --verbose passes every line on.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

LOG = Path("build") / "build.log"
# A compiler command's source: "... -c <source> -o <object> ..."
_SOURCE = r"-c (\S+\.(?:cpp|cu|c|cc)) -o "
# A ninja step: "[3/11] <compiler> ... -c <source> -o <object> ..."
STEP = re.compile(rf"^\[(\d+)/(\d+)\] (\S+) .*?{_SOURCE}")
# What the user cannot act on: torch's note that this machine has no CUDA driver (a CPU build
# machine compiles the CUDA kernels all the same).
NOISE = re.compile(r"No CUDA runtime is found, using CUDA_HOME=")
# A compile that failed, as ninja reports it ("FAILED: [code=1] <object>"), then its command.
FAILED = re.compile(r"^FAILED: ")
COMPILED = re.compile(rf" {_SOURCE}")
# The lines of a traceback before its exception's line, and those that chain one to the next.
TRACEBACK = "Traceback (most recent call last):"
CHAINED = ("The above exception was the direct cause", "During handling of the above exception")


def condense(line: str, root: Path) -> str | None:
    """The line to print for one line of the build's output (None: none)."""
    if NOISE.search(line):
        return None
    step = STEP.match(line)
    if step is None:
        return line
    return f"[{step.group(1)}/{step.group(2)}] compiling {_shown(step.group(4), root)}"


def _shown(source: str, root: Path) -> str:
    """A source as the output names it: relative to the checkout when inside it."""
    path = Path(source).resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else source


class Condensed:
    """The lines to print of the build's output, read one at a time: each compiled file's as
    condense() gives it, a traceback as its last exception's line, the sources that failed noted."""

    def __init__(self, root: Path):
        self.root, self.failed, self._after_failed = root, [], False
        self._in_traceback, self._exception = False, None

    def line(self, line: str) -> list[str]:
        if self._after_failed and (source := COMPILED.search(line)):
            self.failed.append(_shown(source.group(1), self.root))
        self._after_failed = bool(FAILED.match(line))
        if line == TRACEBACK or line.startswith(CHAINED):
            self._in_traceback, self._exception = True, None  # a chained one replaces the one before
            return []
        if self._in_traceback:
            if line.startswith(" ") or not line:
                return []
            self._in_traceback, self._exception = False, line  # held: the next traceback may chain to it
            return []
        if self._exception is not None and not line:
            return []  # between an exception and the traceback that may chain to it
        return self.flush() + ([] if (c := condense(line, self.root)) is None else [c])

    def flush(self) -> list[str]:
        exception, self._exception = self._exception, None
        return [exception] if exception else []


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv[: argv.index("--")] if "--" in argv else False
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    root = Path.cwd().resolve()
    LOG.parent.mkdir(exist_ok=True)
    condensed = Condensed(root)
    with (
        LOG.open("w") as log,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as build,
    ):
        for line in build.stdout:
            log.write(line)
            for shown in [line.rstrip("\n")] if verbose else condensed.line(line.rstrip("\n")):
                print(shown, flush=True)
    for shown in condensed.flush():
        print(shown, flush=True)
    if build.returncode != 0:
        if not verbose:
            what = (
                f"{', '.join(condensed.failed)} did not compile (the errors above)"
                if condensed.failed
                else "the message above"
            )
            print(f"The build failed: {what}. The whole output, every compiler command and traceback: {LOG} "
                  "(`nox -s build -- --verbose` prints it as it runs).", flush=True)  # fmt: skip
        return build.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
