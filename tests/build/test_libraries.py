"""The two libraries a CUDA build makes: the CPU library loads without CUDA (a CPU-only torch), the
CUDA library carries its own CUDA runtime (torch's CUDA 12 and 13 builds alike) and registers only its
CUDA kernels; which of them the package loads under which torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import custom_op
from custom_op import _library, build_config, cxx_runtime, ops

PACKAGE = Path(custom_op.__file__).parent


def built(module: str) -> Path | None:
    found = sorted(PACKAGE.glob(f"{module}.*so"))
    return found[0] if found else None


CPU, CUDA = built(build_config.CPU_LIBRARY), built(build_config.CUDA_LIBRARY)
needs_cuda_library = pytest.mark.skipif(CUDA is None, reason="built without CUDA (CUSTOM_OP_CUDA=0 or no toolkit)")


@pytest.mark.parametrize(
    ("torch_cuda", "has_cuda_library", "expected"),
    [
        (None, True, ["_C"]),  # a CPU-only torch: the CUDA library would not load (no libtorch_cuda.so)
        (None, False, ["_C"]),
        ("12.6", True, ["_C", "_C_cuda"]),  # PyTorch's cu126 and cu128 builds
        ("12.8", True, ["_C", "_C_cuda"]),
        ("13.0", True, ["_C", "_C_cuda"]),  # PyPI's torch from 2.11
        ("13.2", True, ["_C", "_C_cuda"]),
        ("13.0", False, ["_C"]),  # a CPU-only build of the library
    ],
)
def test_the_libraries_loaded_under_each_torch(torch_cuda, has_cuda_library, expected):
    assert _library.to_load(torch_cuda, has_cuda_library) == expected


def needed(library: Path) -> list[str]:
    linkage = cxx_runtime.inspect(library)
    if linkage is None:
        pytest.skip("no readelf to inspect the library with")
    return linkage.needed


def test_the_cpu_library_needs_no_cuda():
    if CPU is None:
        pytest.skip("not built in place")
    cuda = [name for name in needed(CPU) if "cuda" in name or name.startswith("libcudart")]
    assert not cuda, f"{CPU.name} needs {cuda}: it would not load under a CPU-only torch"


@needs_cuda_library
def test_the_cuda_library_carries_its_cuda_runtime():
    names = needed(CUDA)
    assert not [name for name in names if name.startswith("libcudart")], f"{CUDA.name} needs {names}"
    assert "libtorch_cuda.so" in names  # the current stream, from torch's CUDA build of either major


@needs_cuda_library
def test_under_a_cuda_torch_both_load_cpu_first():
    if torch.version.cuda is None:
        pytest.skip("a CPU-only torch")
    assert [Path(p) for p in custom_op.LIBRARY_PATHS] == [CPU, CUDA]
    assert Path(custom_op.LIBRARY_PATH) == CPU


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)


@needs_cuda_library
def test_under_a_cpu_only_torch_the_cuda_library_is_not_loaded():
    """As under torch's CPU build (torch.version.cuda is None there): the CPU library alone, and its ops run."""
    code = (
        "import torch; torch.version.cuda = None\n"
        "import custom_op\n"
        "print(len(custom_op.LIBRARY_PATHS), custom_op.LIBRARY_PATHS[0].rsplit('/', 1)[-1].split('.')[0])\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", build_config.CPU_LIBRARY]


@needs_cuda_library
def test_the_cuda_library_alone_defines_no_operator():
    """Its .cpp files compile to helpers only: the schemas and CPU kernels are the CPU library's, so
    loading both registers each once."""
    if not ops.specs():
        pytest.skip("no operator in the registry")
    code = (
        "import torch\n"
        f"torch.ops.load_library({str(CUDA)!r})\n"
        "try:\n"
        f"    torch.ops.{_library.NAMESPACE}.{ops.specs()[0].name}.default\n"
        "except (AttributeError, RuntimeError):\n"
        "    print('undefined')\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["undefined"]
