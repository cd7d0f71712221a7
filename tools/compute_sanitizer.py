"""The GPU tests under compute-sanitizer (nox -s sanitize): where it is, and its command lines."""

from __future__ import annotations

import os
import shutil

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")

# GPU tests small enough to run under the sanitizers (which slow kernels 10-100x); the NCCL test
# runs the same kernels as the single-GPU ones, under two processes the sanitizer would follow, and
# the export tests (tests/deploy) run them again after compiling a package.
TESTS = ("-m", "gpu and not export", "-k", "not large and not benchmark_shapes and not nccl", "-x", "-q", "-p", "no:cacheprovider")  # fmt: skip

NOT_FOUND = "compute-sanitizer not found: it ships with the CUDA toolkit (put its bin/ on PATH)"


def find(environ: dict[str, str]) -> str | None:
    """compute-sanitizer on the environment's PATH, in its CUDA_HOME, or in /usr/local/cuda."""
    candidates = [
        shutil.which("compute-sanitizer", path=environ.get("PATH")),
        os.path.join(environ.get("CUDA_HOME", "/nonexistent"), "bin", "compute-sanitizer"),
        "/usr/local/cuda/bin/compute-sanitizer",
    ]
    return next((c for c in candidates if c and os.path.exists(c)), None)


def arguments(tool: str) -> list[str]:
    args = ["--tool", tool, "--error-exitcode", "1", "--target-processes", "all"]
    # Only this library's kernels are checked for races, bad accesses and barriers (the tests'
    # references run PyTorch's own). initcheck instruments every kernel: memory written by a kernel
    # it skips would look uninitialized to the next one that reads it.
    if tool != "initcheck":
        args += ["--kernel-name", "kns=custom_op"]
    if tool == "memcheck":
        args += ["--leak-check", "no"]  # PyTorch's caching allocator keeps memory on purpose
    return args


def commands(sanitizer: str, python: str, test_paths: list[str], tools: list[str]) -> list[list[str]]:
    """One command per sanitizer tool (all four when none is named)."""
    pytest = [python, "-m", "pytest", *test_paths, *TESTS]
    return [[sanitizer, *arguments(tool), *pytest] for tool in tools or TOOLS]
