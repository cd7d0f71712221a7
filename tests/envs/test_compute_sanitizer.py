"""nox -s sanitize's command lines: each tool over the small GPU tests, this library's kernels only
where a tool can be limited to them."""

from __future__ import annotations

from tools import compute_sanitizer


def test_one_command_per_tool_each_running_the_small_gpu_tests():
    commands = compute_sanitizer.commands("cs", "py", ["tests/ops"], [])
    assert [c[c.index("--tool") + 1] for c in commands] == list(compute_sanitizer.TOOLS)
    assert compute_sanitizer.commands("cs", "py", ["tests/ops"], ["racecheck"]) == [
        ["cs", "--tool", "racecheck", "--error-exitcode", "1", "--target-processes", "all",
         "--kernel-name", "kns=custom_op", "py", "-m", "pytest", "tests/ops", *compute_sanitizer.TESTS]
    ]  # fmt: skip


def test_initcheck_watches_every_kernel_memcheck_ignores_the_caching_allocator():
    assert "--kernel-name" not in compute_sanitizer.arguments("initcheck")
    memcheck = compute_sanitizer.arguments("memcheck")
    assert memcheck[memcheck.index("--kernel-name") + 1].startswith("kns=")
    assert memcheck[memcheck.index("--leak-check") + 1] == "no"
    assert "--leak-check" not in compute_sanitizer.arguments("synccheck")


def test_the_sanitizer_is_found_on_path_or_in_cuda_home(tmp_path):
    tool = tmp_path / "cuda" / "bin" / "compute-sanitizer"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert compute_sanitizer.find({"PATH": str(tool.parent)}) == str(tool)
    assert compute_sanitizer.find({"PATH": "", "CUDA_HOME": str(tmp_path / "cuda")}) == str(tool)
