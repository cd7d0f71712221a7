"""CUSTOM_OP_DISPATCH_FLOATING_TYPES (csrc/common/dispatch.h) takes a lambda with commas of its own (a
template's <scalar_t, 4, true>, a launch's <<<grid, threads, 0>>>), in C++ and in CUDA, and returns
what the lambda returns: compiled with the build's own flags."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from custom_op import build_config

CPP = """#include "common/dispatch.h"
template <typename T, int K, bool B> int width() { return int(sizeof(T)) * K * B; }
int f(torch::headeronly::ScalarType t) {
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(t, "custom_op::f", [&] { (void)width<scalar_t, 4, true>(); });
  return CUSTOM_OP_DISPATCH_FLOATING_TYPES(t, "custom_op::f", [&] { return width<scalar_t, 4, true>(); });
}
"""

CUDA = """#include "common/dispatch.h"
template <typename T, int K, bool B> __global__ void fill(T* out, int n) {
  if (B && int(threadIdx.x) < n) out[threadIdx.x] = T(K);
}
void f(torch::headeronly::ScalarType t, void* out) {
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(t, "custom_op::f", [&] {
    fill<scalar_t, 4, true><<<1, 32, 0>>>(static_cast<scalar_t*>(out), 3);
  });
}
"""


def _compile(compiler: list[str], source: Path, flags: list[str]) -> None:
    includes = [f"-I{d}" for d in build_config.include_dirs()]
    done = subprocess.run([*compiler, *flags, *includes, "-c", str(source), "-o", str(source.with_suffix(".o"))],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_lambda_with_commas_compiles_in_cpp(tmp_path):
    source = tmp_path / "dispatch.cpp"
    source.write_text(CPP)
    _compile([os.environ.get("CXX", "c++"), "-std=c++17"], source, [*build_config.cxx_flags(False), "-Werror"])


def test_a_launch_inside_the_lambda_compiles_in_cuda(tmp_path):
    home = build_config.cpp_extension().CUDA_HOME
    nvcc = shutil.which("nvcc", path=str(Path(home) / "bin")) if home else None
    if nvcc is None:
        pytest.skip("no CUDA toolkit found: the CUDA build is not made here either")
    source = tmp_path / "dispatch.cu"
    source.write_text(CUDA)
    torch_includes = [f"-I{p}" for p in build_config.cpp_extension().include_paths()]
    _compile([nvcc, "-std=c++17", *torch_includes], source, build_config.nvcc_flags())
