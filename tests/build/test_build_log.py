"""The build's output (tools/build_log.py): a line per compiled file, the whole log kept and shown on
a failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "build_log.py"
NINJA = (
    "[3/11] /envs/bin/nvcc -MD -MF /r/build/x.o.d -I/r/pkg/csrc "
    + "-I/some/include " * 40
    + "-c -c /r/pkg/ops/my_op/my_op_cuda.cu -o /r/build/my_op_cuda.o -O3 -std=c++20"
)


def _run(tmp_path: Path, lines: list[str], code: int, *flags: str) -> subprocess.CompletedProcess:
    program = "import sys\n" + "".join(f"print({line!r})\n" for line in lines) + f"sys.exit({code})\n"
    command = [sys.executable, str(SCRIPT), *flags, "--", sys.executable, "-c", program]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)


def test_a_line_per_compiled_file_and_the_whole_log_kept(tmp_path):
    noise = "W1207 06:21:22.174000 517 cpp_extension.py:183] No CUDA runtime is found, using CUDA_HOME='/envs'"
    lines = ["custom_op: CPU library", noise, NINJA, "x.cu(3): warning: y"]
    done = _run(tmp_path, lines, 0)
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        "custom_op: CPU library",
        "[3/11] compiling /r/pkg/ops/my_op/my_op_cuda.cu",
        "x.cu(3): warning: y",
    ]
    assert (tmp_path / "build" / "build.log").read_text().splitlines() == lines


def test_a_failure_prints_the_whole_output(tmp_path):
    done = _run(tmp_path, [NINJA, "my_op_cuda.cu(9): error: no"], 3)
    assert done.returncode == 3
    assert NINJA in done.stdout and "The build failed; its whole output (build/build.log):" in done.stdout


def test_verbose_passes_every_line_on(tmp_path):
    assert _run(tmp_path, [NINJA], 0, "--verbose").stdout.splitlines() == [NINJA]
