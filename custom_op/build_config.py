"""Build settings shared by setup.py (installed builds) and custom_op.jit (the JIT loop).

Environment variables, all optional:
    CUSTOM_OP_CUDA        "1": CUDA kernels are required (fail without a CUDA toolkit);
                          "0": CPU only; unset: CUDA when a toolkit and a CUDA torch are found.
    TORCH_CUDA_ARCH_LIST  GPU architectures, e.g. "9.0" or "8.0;9.0+PTX". Unset: the visible
                          GPUs' architectures, or the toolkit's default_cuda_arch_list() when
                          none is visible.
    MAX_JOBS              parallel compile jobs. Unset: from CPU cores and available memory.
    CUSTOM_OP_DEBUG       "1": -O0 -g (and -G for device code) instead of optimized flags.
    CUSTOM_OP_VEC_REPORT  "1": print the compiler's vectorization report for the CPU kernels.
    CUSTOM_OP_WERROR      "1": compiler warnings (-Wall -Wextra) are errors in C++ sources (CI).

A build with CUDA makes two libraries: CPU_LIBRARY from every .cpp file (the schemas and the CPU
kernels; it needs no CUDA), and CUDA_LIBRARY from every .cu file plus the .cpp files again (the
helpers its kernels call; their registrations compile to nothing there, csrc/common/library.h),
with the CUDA runtime linked in statically. The package loads the second only under a CUDA torch.

This module imports nothing from the package, so setup.py can load it by path.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

# Stable ABI target: the binary runs under every torch from 2.11 on.
TORCH_TARGET_VERSION = "0x020b000000000000"
MIN_TORCH = (2, 11)

# Architectures built when no GPU is visible (CI, Docker builds) and always by `nox -s wheel`:
# Turing, Ampere, Hopper, Blackwell, plus PTX for newer GPUs. The CUDA 13 toolkit dropped
# everything before 7.5; CUDA 12 compiles Blackwell from 12.8 on.
DEFAULT_CUDA_ARCH_LIST = "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
DEFAULT_CUDA_ARCH_LIST_BEFORE_12_8 = "7.5;8.0;8.6;9.0+PTX"

# The compiled libraries, modules of the package: the CPU library and the CUDA library.
CPU_LIBRARY = "_C"
CUDA_LIBRARY = "_C_cuda"
# Libraries that link the CUDA runtime into the CUDA library, so that it needs no libcudart.so of
# one major version and loads under torch builds of either.
STATIC_CUDA_RUNTIME = ("cudart_static", "dl", "rt", "pthread")

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
    """All C++ (and with_cuda, CUDA) sources under `root`, in a stable order."""
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


def cpu_library_sources(root: Path = PACKAGE) -> list[str]:
    """The CPU library's sources: every .cpp file."""
    return sources(False, root)


def cuda_library_sources(root: Path = PACKAGE) -> list[str]:
    """The CUDA library's sources: every .cu file, and the .cpp files for the helpers they call."""
    return sources(True, root)


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


def cpp_extension():
    """torch.utils.cpp_extension, imported without its "No CUDA runtime is found" warning: where no
    GPU is visible the build still compiles with the toolkit it names, and the build's and doctor's
    summaries say which; the warning gives the user nothing to act on."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        import torch.utils.cpp_extension
    finally:
        logger.setLevel(level)
    return torch.utils.cpp_extension


def cuda_enabled() -> bool:
    """Whether to compile the CUDA kernels, from CUSTOM_OP_CUDA and the toolchain found.

    Never decided by whether a GPU is visible: CI and Docker builds have none.
    """
    import torch

    cuda_home = cpp_extension().CUDA_HOME
    request = os.environ.get("CUSTOM_OP_CUDA", "").strip()
    if request not in ("", "0", "1"):
        raise BuildConfigError(f"CUSTOM_OP_CUDA must be 0, 1 or unset, got {request!r}")
    if request == "0":
        return False
    problems = []
    if torch.version.cuda is None:
        problems.append(f"torch {torch.__version__} is a CPU-only build (install a CUDA build of torch)")
    if cuda_home is None:
        problems.append("no CUDA toolkit found (set CUDA_HOME or put nvcc on PATH)")
    if not problems:
        return True
    if request == "1":
        raise BuildConfigError("CUSTOM_OP_CUDA=1 but the CUDA kernels cannot be built: " + "; ".join(problems))
    print("custom_op: building CPU kernels only: " + "; ".join(problems) + ". Set CUSTOM_OP_CUDA=1 to require CUDA.")
    return False


def toolkit_version(cuda_home: str | None = None) -> tuple[int, int] | None:
    """The CUDA version of the toolkit the build compiles with (nvcc --version), None if not found."""
    if cuda_home is None:
        cuda_home = cpp_extension().CUDA_HOME
    if not cuda_home:
        return None
    try:
        out = subprocess.run([str(Path(cuda_home) / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
    except OSError:
        return None
    match = re.search(r"release (\d+)\.(\d+)", out.stdout)
    return (int(match[1]), int(match[2])) if match else None


def default_cuda_arch_list(toolkit: tuple[int, int] | None) -> str:
    """The architectures built when none is asked for, for the toolkit's CUDA version."""
    if toolkit is not None and toolkit < (12, 8):
        return DEFAULT_CUDA_ARCH_LIST_BEFORE_12_8
    return DEFAULT_CUDA_ARCH_LIST


def normalize_arch_list(text: str) -> str:
    """TORCH_CUDA_ARCH_LIST's entries (semicolons or spaces between them) joined by semicolons."""
    return ";".join(part for part in re.split(r"[;\s]+", text.strip()) if part)


def configure_cuda_arch_list() -> str:
    """Sets TORCH_CUDA_ARCH_LIST to the architectures to build and returns it: the one given, else
    the visible GPUs' (PTX for the newest), else the toolkit's default."""
    import torch

    chosen = normalize_arch_list(os.environ.get("TORCH_CUDA_ARCH_LIST", ""))
    if not chosen and torch.cuda.is_available() and torch.cuda.device_count() > 0:
        caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        chosen = ";".join(f"{major}.{minor}" for major, minor in caps) + "+PTX"
    if not chosen:
        chosen = default_cuda_arch_list(toolkit_version())
    os.environ["TORCH_CUDA_ARCH_LIST"] = chosen
    return chosen


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
    return [flag for path in cpp_extension().include_paths() for flag in ("-isystem", path)]


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
    """nvcc's flags; the architectures (configure_cuda_arch_list) are recorded for error messages."""
    # '/' for ';': nvcc splits option values at commas, and the shell would at semicolons.
    archs = normalize_arch_list(os.environ.get("TORCH_CUDA_ARCH_LIST", "")).replace(";", "/")
    flags = [f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}", "-DUSE_CUDA"]
    flags += [f"-DCUSTOM_OP_CUDA_ARCHS={archs}"] if archs else []
    flags += ["-O0", "-g", "-G"] if debug_build() else ["-O3", "-lineinfo"]
    return flags


def cuda_library_flags(flags: list[str]) -> list[str]:
    """`flags` (the C++ or nvcc flags) for the CUDA library's compile: its .cpp files register nothing."""
    return [*flags, "-DCUSTOM_OP_CUDA_LIBRARY"]
