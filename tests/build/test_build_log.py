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


def test_a_failure_names_the_file_that_did_not_compile_and_the_log(tmp_path):
    command = "c++ -MMD " + "-I/some/include " * 40 + "-c /r/pkg/ops/my_op/my_op_cpu.cpp -o /r/build/my_op_cpu.o"
    lines = [NINJA, "FAILED: [code=1] /r/build/my_op_cpu.o", command, "my_op_cpu.cpp:9:3: error: no", *TRACEBACKS]
    done = _run(tmp_path, lines, 3)
    assert done.returncode == 3
    shown = done.stdout.splitlines()
    assert command in shown and "my_op_cpu.cpp:9:3: error: no" in shown  # the command that failed, its errors
    assert shown[-2:] == [
        "RuntimeError: Error compiling objects for extension",  # a traceback shows as its last line
        "The build failed: /r/pkg/ops/my_op/my_op_cpu.cpp did not compile (the errors above). The whole output, "
        "every compiler command and traceback: build/build.log (`nox -s build -- --verbose` prints it as it runs).",
    ]
    assert (tmp_path / "build" / "build.log").read_text().splitlines() == lines


# setuptools' chained tracebacks after ninja fails: a compiler error says all they say.
TRACEBACKS = [
    "Traceback (most recent call last):",
    '  File "cpp_extension.py", line 2906, in _run_ninja_build',
    "    subprocess.run(",
    "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "setup.py", line 134, in <module>',
    "RuntimeError: Error compiling objects for extension",
]


def test_verbose_passes_every_line_on(tmp_path):
    assert _run(tmp_path, [NINJA], 0, "--verbose").stdout.splitlines() == [NINJA]
