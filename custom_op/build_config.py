"""Build settings shared by setup.py (installed builds) and custom_op.jit (the JIT loop).

Environment variables, all optional:
    CUSTOM_OP_CUDA        "1": CUDA kernels are required (fail without a CUDA toolkit);
                          "0": CPU only; unset: CUDA when a toolkit and a CUDA torch are found.
    TORCH_CUDA_ARCH_LIST  GPU architectures, e.g. "9.0" or "8.0;9.0+PTX". Unset: the visible
                          GPUs' architectures, or DEFAULT_CUDA_ARCH_LIST when none is visible.
    MAX_JOBS              parallel compile jobs. Unset: from CPU cores and available memory.
    CUSTOM_OP_DEBUG       "1": -O0 -g (and -G for device code) instead of optimized flags.
    CUSTOM_OP_VEC_REPORT  "1": print the compiler's vectorization report for the CPU kernels.
    CUSTOM_OP_WERROR      "1": compiler warnings (-Wall -Wextra) are errors in C++ sources (CI).

This module imports nothing from the package, so setup.py can load it by path.
"""

from __future__ import annotations

import os
from pathlib import Path

# Stable ABI target: the binary runs under every torch from 2.11 on.
TORCH_TARGET_VERSION = "0x020b000000000000"
MIN_TORCH = (2, 11)

# Architectures built when no GPU is visible (CI, Docker builds): Turing, Ampere, Hopper,
# Blackwell, plus PTX for newer GPUs. The CUDA 13 toolkit dropped everything before 7.5.
DEFAULT_CUDA_ARCH_LIST = "7.5;8.0;8.6;9.0;10.0;12.0+PTX"

# Memory one compile job may take (nvcc peaks near 1.5 GB on these kernels).
_GB_PER_JOB = 2.0

# The package: shared C++ in csrc/ (on the include path), each operator's C++ in ops/<name>/.
PACKAGE = Path(__file__).resolve().parent
SOURCE_FOLDERS = ("csrc", "ops")


class BuildConfigError(RuntimeError):
    """The requested build cannot be made with this environment."""


def _files(root: Path, patterns) -> list[Path]:
    return sorted(p for folder in SOURCE_FOLDERS for pattern in patterns for p in (root / folder).rglob(pattern))


def sources(with_cuda: bool, root: Path = PACKAGE) -> list[str]:
    """All C++ (and with_cuda, CUDA) sources of the library under `root`, in a stable order."""
    found = _files(root, ["*.cpp", "*.cu"])
    seen: dict[str, Path] = {}
    for path in found:  # the JIT build names each object after its file alone
        if path.stem in seen:
            raise BuildConfigError(
                f"two sources share the name {path.stem!r}: {seen[path.stem]} and {path}; "
                "name an operator's files after it (<op>_cpu.cpp, <op>_cuda.cu, ...)"
            )
        seen[path.stem] = path
    return [str(p) for p in found if with_cuda or p.suffix == ".cpp"]


def header_files(root: Path = PACKAGE) -> list[Path]:
    return _files(root, ["*.h", "*.cuh"])


def include_dirs(root: Path = PACKAGE) -> list[str]:
    """Sources include shared headers as "common/checks.h"."""
    return [str(root / "csrc")]


def debug_build() -> bool:
    return os.environ.get("CUSTOM_OP_DEBUG", "0") == "1"


def check_torch_version(version: str) -> None:
    major, minor = (int(part) for part in version.split("+")[0].split(".")[:2])
    if (major, minor) < MIN_TORCH:
        raise BuildConfigError(
            f"custom_op needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} (its stable ABI), found "
            f"torch {version}. Install a newer torch, e.g. pip install 'torch>=2.11'."
        )


def cuda_enabled() -> bool:
    """Whether to compile the CUDA kernels, from CUSTOM_OP_CUDA and the toolchain found.

    Never decided by whether a GPU is visible: CI and Docker builds have none.
    """
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    request = os.environ.get("CUSTOM_OP_CUDA", "").strip()
    if request not in ("", "0", "1"):
        raise BuildConfigError(f"CUSTOM_OP_CUDA must be 0, 1 or unset, got {request!r}")
    if request == "0":
        return False
    problems = []
    if torch.version.cuda is None:
        problems.append(f"torch {torch.__version__} is a CPU-only build (install a CUDA build of torch)")
    if CUDA_HOME is None:
        problems.append("no CUDA toolkit found (set CUDA_HOME or put nvcc on PATH)")
    if not problems:
        return True
    if request == "1":
        raise BuildConfigError("CUSTOM_OP_CUDA=1 but the CUDA kernels cannot be built: " + "; ".join(problems))
    print("custom_op: building CPU kernels only: " + "; ".join(problems) + ". Set CUSTOM_OP_CUDA=1 to require CUDA.")
    return False


def configure_cuda_arch_list() -> str:
    """Sets TORCH_CUDA_ARCH_LIST when unset and no GPU is visible; returns the list used."""
    import torch

    chosen = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if chosen:
        return chosen
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        return ";".join(f"{major}.{minor}" for major, minor in caps) + " (visible GPUs)"
    os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_CUDA_ARCH_LIST
    return DEFAULT_CUDA_ARCH_LIST + " (default: no GPU visible)"


def _available_memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return None


def configure_max_jobs() -> int:
    """Sets MAX_JOBS (read by torch.utils.cpp_extension's ninja build) when unset."""
    if os.environ.get("MAX_JOBS", "").strip():
        return int(os.environ["MAX_JOBS"])
    jobs = os.cpu_count() or 1
    memory = _available_memory_gb()
    if memory is not None:
        jobs = min(jobs, max(1, int(memory / _GB_PER_JOB)))
    os.environ["MAX_JOBS"] = str(jobs)
    return jobs


def _torch_headers_as_system() -> list[str]:
    # torch's headers warn under -Wextra; as system headers they do not, and ours still do.
    from torch.utils.cpp_extension import include_paths

    return [flag for path in include_paths() for flag in ("-isystem", path)]


def cxx_flags(with_cuda: bool) -> list[str]:
    flags = [f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}", "-fvisibility=hidden", "-Wall", "-Wextra"]
    flags += _torch_headers_as_system()
    if os.environ.get("CUSTOM_OP_WERROR") == "1":
        flags.append("-Werror")
    # -g0: Python's own CFLAGS carry -g, which would triple the library's size.
    flags += ["-O0", "-g"] if debug_build() else ["-O3", "-g0"]
    if with_cuda:
        flags.append("-DUSE_CUDA")
    if os.environ.get("CUSTOM_OP_VEC_REPORT") == "1":
        flags.append("-fopt-info-vec-optimized")
    return flags


def nvcc_flags() -> list[str]:
    flags = [f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}", "-DUSE_CUDA"]
    flags += ["-O0", "-g", "-G"] if debug_build() else ["-O3", "-lineinfo"]
    return flags
