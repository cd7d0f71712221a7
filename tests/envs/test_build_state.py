"""When `nox -s test` and `nox -s bench` build first: the library missing, built for another
environment or settings, or older than any build input (a header included)."""

from __future__ import annotations

import os

import pytest

from tools import build_state


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    for name in build_state.SETTINGS:
        monkeypatch.delenv(name, raising=False)
    package = tmp_path / "myops"
    for path in ("_library.py", "build_config.py", "csrc/common/checks.h", "ops/op/op_cpu.cpp"):
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text("")
    (tmp_path / "setup.py").write_text("")
    return tmp_path


def age(path, seconds):
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime - seconds))


def test_a_build_is_needed_until_one_is_recorded_for_this_environment(checkout, monkeypatch):
    stamp, prefix = checkout / "build" / "stamp.json", checkout / ".envs" / "venv-1"
    assert build_state.needs_build(prefix, checkout, stamp)  # no library
    library = checkout / "myops" / "_C.abi3.so"
    library.write_text("")
    assert build_state.needs_build(prefix, checkout, stamp)  # no stamp
    build_state.record(prefix, stamp)
    assert not build_state.needs_build(prefix, checkout, stamp)
    assert build_state.needs_build(checkout / ".envs" / "conda-2", checkout, stamp)  # another environment
    monkeypatch.setenv("CUSTOM_OP_CUDA", "0")
    assert build_state.needs_build(prefix, checkout, stamp)  # other settings


def test_any_input_newer_than_the_library_needs_a_build(checkout):
    stamp, prefix = checkout / "build" / "stamp.json", checkout / ".envs" / "venv-1"
    library = checkout / "myops" / "_C.abi3.so"
    library.write_text("")
    build_state.record(prefix, stamp)
    for path in build_state.sources.build_inputs(checkout):
        age(path, 60)
    assert not build_state.needs_build(prefix, checkout, stamp)
    (checkout / "myops" / "csrc" / "common" / "checks.h").write_text("// edited\n")  # a header alone
    assert build_state.needs_build(prefix, checkout, stamp)
