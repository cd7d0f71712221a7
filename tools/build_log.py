"""The build's output, a line per compiled file: `python tools/build_log.py [--verbose] -- COMMAND...`.

torch's extension builder runs ninja with -v, which prints each compiler command line whole (some
1,700 characters). This runs the build, prints `[k/N] compiling <file>` for each of those and every
other line as it comes (the build's own messages, compiler warnings and errors), keeps the whole
output in build/build.log, and on a failure prints that log whole. --verbose passes every line on.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

LOG = Path("build") / "build.log"
# A ninja step: "[3/11] <compiler> ... -c <source> -o <object> ..."
STEP = re.compile(r"^\[(\d+)/(\d+)\] (\S+) .*?-c (\S+\.(?:cpp|cu|c|cc)) -o ")
# What the user cannot act on: torch's note that this machine has no CUDA driver (a CPU build
# machine compiles the CUDA kernels all the same).
NOISE = re.compile(r"No CUDA runtime is found, using CUDA_HOME=")


def condense(line: str, root: Path) -> str | None:
    """The line to print for one line of the build's output (None: none)."""
    if NOISE.search(line):
        return None
    step = STEP.match(line)
    if step is None:
        return line
    k, n, source = step.group(1), step.group(2), Path(step.group(4))
    if source.resolve().is_relative_to(root):
        source = source.resolve().relative_to(root)
    return f"[{k}/{n}] compiling {source}"


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv[: argv.index("--")] if "--" in argv else False
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    root = Path.cwd().resolve()
    LOG.parent.mkdir(exist_ok=True)
    with (
        LOG.open("w") as log,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as build,
    ):
        for line in build.stdout:
            log.write(line)
            shown = line.rstrip("\n") if verbose else condense(line.rstrip("\n"), root)
            if shown is not None:
                print(shown, flush=True)
    if build.returncode != 0:
        if not verbose:
            print(f"The build failed; its whole output ({LOG}):", flush=True)
            print(LOG.read_text(), end="", flush=True)
        return build.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
