"""A toolchain that links libstdc++ statically cannot produce a library silently: the build stops
with the compiler's name and the fix, and what it checks is the built library itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from custom_op import cxx_runtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_compiler_links_libstdcxx_dynamically():
    linkage = cxx_runtime.probe(cxx_runtime.compiler())
    assert linkage is not None and linkage.ok, linkage
    assert any(n.startswith("libstdc++.so") for n in linkage.needed)


def test_a_static_libstdcxx_library_is_found_by_what_it_links_and_defines(static_libstdcxx_compiler):
    linkage = cxx_runtime.probe(static_libstdcxx_compiler)
    assert linkage is not None and not linkage.ok
    assert not linkage.shared_runtime
    assert "__cxa_throw" in linkage.runtime_defined
    assert "needs no shared libstdc++" in linkage.describe()


def test_partly_static_is_caught_too():
    # libstdc++.so.6 in NEEDED and a private copy of its exception runtime (libsupc++.a) beside it
    linkage = cxx_runtime.probe("g++", ("-Wl,--push-state,-Bstatic,-lsupc++,--pop-state",))
    assert linkage is not None and linkage.shared_runtime and not linkage.ok
    assert "defines the C++ runtime's own" in linkage.describe()


def _build_env(cxx: str) -> dict:
    env = dict(os.environ, CXX=cxx, CUSTOM_OP_CUDA="0")
    env.pop("CUSTOM_OP_WERROR", None)  # the wrapper's flag is not the point here
    return env


@pytest.mark.skipif(not (ROOT / "setup.py").exists(), reason="needs the repository's setup.py")
def test_the_build_stops_with_the_compiler_and_the_fix(tmp_path, static_libstdcxx_compiler):
    lib = tmp_path / "lib"
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(lib), "--build-temp", str(tmp_path / "t")],
        cwd=ROOT,
        env=_build_env(static_libstdcxx_compiler),
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    message = result.stderr + result.stdout
    assert f"the C++ compiler {static_libstdcxx_compiler}" in message
    assert "linked libstdc++ statically" in message and "defines the C++ runtime's own __cxa_throw" in message
    assert "Fix: build with a compiler that links libstdc++ dynamically, e.g. CXX=" in message
    assert "-static-libstdc++" in message
    assert not list(lib.rglob("_C*.so")), "the refused library was left behind"


@pytest.mark.skipif(not (ROOT / "setup.py").exists(), reason="needs the repository's setup.py")
def test_the_jit_build_refuses_it_too(tmp_path, static_libstdcxx_compiler):
    code = (
        "import custom_op.jit, custom_op.cxx_runtime as c\n"
        "try:\n    custom_op.jit.load(with_cuda=False)\n"
        "except c.StaticCxxRuntimeError as e:\n    print('refused:', e)\n"
    )
    env = dict(_build_env(static_libstdcxx_compiler), CUSTOM_OP_JIT_DIR=str(tmp_path / "jit"))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert "refused: custom_op: the C++ compiler" in result.stdout, result.stderr[-2000:]
    assert "into a test library" in result.stdout  # refused before building: nothing was loaded
    assert not list((tmp_path / "jit").rglob("*.so")), "the refused JIT library was kept for the next load()"
