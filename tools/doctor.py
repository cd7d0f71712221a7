"""Diagnoses the build toolchain; each finding comes with its fix. Runs in the project environment.

python tools/doctor.py            # all checks (nox -s doctor)
python tools/doctor.py --summary  # what a build will use (nox -s build prints it)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The two self-contained build modules, not the package: importing custom_op loads the library,
# and a library linked with its own libstdc++ can crash at load, the very thing diagnosed here.
sys.path.insert(0, str(ROOT / "custom_op"))
import build_config  # noqa: E402
import cxx_runtime  # noqa: E402

# Newest GCC major each nvcc major.minor accepts as host compiler (CUDA installation guides).
NVCC_MAX_GCC = {(12, 0): 12, (12, 4): 13, (12, 8): 14, (13, 0): 15}


def _version(command: list[str]) -> str | None:
    try:
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def nvcc_version(cuda_home: str | None) -> tuple[int, int] | None:
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else shutil.which("nvcc")
    out = _version([nvcc, "--version"]) if nvcc else None
    match = re.search(r"release (\d+)\.(\d+)", out or "")
    return (int(match[1]), int(match[2])) if match else None


def clang_major(cxx: str) -> int | None:
    match = re.search(r"clang version (\d+)", _version([cxx, "--version"]) or "")
    return int(match[1]) if match else None


def gcc_major(cxx: str) -> int | None:
    if clang_major(cxx) is not None:  # clang answers -dumpversion too, with its own version
        return None
    out = _version([cxx, "-dumpfullversion", "-dumpversion"])
    return int(out.split(".")[0]) if out and out.split(".")[0].isdigit() else None


def compiler_name(cxx: str) -> str | None:
    """ "GCC 12" or "clang 14"; None when `cxx` is neither."""
    if (gcc := gcc_major(cxx)) is not None:
        return f"GCC {gcc}"
    clang = clang_major(cxx)
    return f"clang {clang}" if clang is not None else None


def findings() -> list[tuple[str, str, str]]:
    """(status, finding, fix) for each check; status is ok, warn or fail."""
    import torch

    CUDA_HOME = build_config.cpp_extension().CUDA_HOME  # noqa: N806

    found = []
    add = found.append
    try:
        build_config.check_torch_version(torch.__version__)
        add(("ok", f"torch {torch.__version__} (stable ABI target 2.11)", ""))
    except build_config.BuildConfigError as error:
        add(("fail", str(error), "install torch >= 2.11"))
    cxx = os.environ.get("CXX", "c++")
    gcc, name = gcc_major(cxx), compiler_name(cxx)
    add(("ok" if name else "fail", f"host compiler {cxx}: {name}", "" if name else "install g++ or set CXX"))
    found.extend(cxx_runtime_findings(cxx))
    ninja = shutil.which("ninja")
    add(("ok" if ninja else "fail", f"ninja: {ninja}", "" if ninja else "pip install ninja"))

    nvcc = nvcc_version(CUDA_HOME)
    if torch.version.cuda is None:
        add(("warn", "torch is a CPU-only build: CUDA kernels cannot be built", "install a CUDA build of torch"))
    elif CUDA_HOME is None or nvcc is None:
        add(
            (
                "warn",
                "no CUDA toolkit found: CUDA kernels will not be built",
                "set CUDA_HOME, or use the venv lock's pip toolchain",
            )
        )
    else:
        torch_cuda = tuple(int(p) for p in torch.version.cuda.split(".")[:2])
        same_major = torch_cuda[0] == nvcc[0]
        # The installed build carries its own runtime (any major); the JIT build links torch's.
        other = (
            ""
            if same_major
            else (
                f": the installed build's CUDA library carries the CUDA {nvcc[0]}.{nvcc[1]} runtime (a driver for it "
                "is needed), but custom_op.jit.load() links torch's runtime and cannot build"
            )
        )
        add(
            (
                "ok" if same_major else "warn",
                f"nvcc {nvcc[0]}.{nvcc[1]} at {CUDA_HOME}, torch built with CUDA {torch.version.cuda}{other}",
                "" if same_major else "for the JIT loop, use an nvcc of torch's CUDA major version",
            )
        )
        limit = max((v for k, v in NVCC_MAX_GCC.items() if k <= nvcc), default=None)
        if gcc and limit and gcc > limit:
            add(
                (
                    "fail",
                    f"GCC {gcc} is newer than nvcc {nvcc[0]}.{nvcc[1]} supports (<= {limit})",
                    f"install g++-{limit} and set CXX",
                )
            )
        elif gcc:
            add(("ok", f"GCC {gcc} is within nvcc {nvcc[0]}.{nvcc[1]}'s supported range", ""))
        include = Path(CUDA_HOME) / "include" / "cuda_runtime.h"
        conda_include = Path(CUDA_HOME) / "targets" / "x86_64-linux" / "include" / "cuda_runtime.h"
        if include.exists() or conda_include.exists():
            add(("ok", f"CUDA headers: {include if include.exists() else conda_include}", ""))
        else:
            add(
                (
                    "fail",
                    f"cuda_runtime.h not found under {CUDA_HOME}",
                    "install the CUDA runtime headers (cuda-cudart-dev)",
                )
            )
        archs = os.environ.get("TORCH_CUDA_ARCH_LIST")
        visible = (
            [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available()
            else []
        )
        if visible and archs:
            missing = [f"{a}.{b}" for a, b in visible if f"{a}.{b}" not in archs]
            add(
                (
                    "warn" if missing else "ok",
                    f"TORCH_CUDA_ARCH_LIST={archs}; visible GPUs {visible}",
                    f"add {missing}" if missing else "",
                )
            )
        else:
            default = build_config.default_cuda_arch_list(nvcc) + " (default, no GPU visible)"
            add(("ok", f"architectures: {archs or (f'visible GPUs {visible}' if visible else default)}", ""))
    memory = build_config._available_memory_gb()
    jobs = int(os.environ.get("MAX_JOBS") or 0) or None
    if memory is not None and jobs and jobs * 2 > memory:
        add(
            (
                "warn",
                f"MAX_JOBS={jobs} with {memory:.1f} GB available: nvcc may run out of memory",
                f"MAX_JOBS={max(1, int(memory // 2))}",
            )
        )
    else:
        add(("ok", f"available memory {memory:.1f} GB, MAX_JOBS {jobs or 'auto'}" if memory else "memory unknown", ""))
    return found


def cxx_runtime_findings(cxx: str) -> list[tuple[str, str, str]]:
    """Whether libraries linked by `cxx` (and the built library, if any) use the shared libstdc++."""
    found = []
    linkage = cxx_runtime.probe(cxx)
    if linkage is None:
        found.append(("warn", f"could not link and inspect a test library with {cxx}", "install binutils and g++"))
    elif linkage.ok:
        found.append(("ok", f"{cxx} links libstdc++ dynamically (the runtime torch uses)", ""))
    else:
        found.append(
            (
                "fail",
                f"{cxx_runtime.describe_compiler(cxx)} links libstdc++ statically: a library it links "
                f"{linkage.describe()}, and the build will stop",
                cxx_runtime.fix_message(cxx),
            )
        )
    found.append(compiled_code_finding(cxx, linkage))
    for library in sorted((ROOT / "custom_op").glob("_C*.so")):
        built = cxx_runtime.inspect(library)
        if built is not None and not built.ok:
            found.append(("fail", f"{library.relative_to(ROOT)} {built.describe()}", "rebuild: nox -s clean build"))
    return found


def compiled_code_finding(cxx: str, linkage: cxx_runtime.Linkage | None) -> tuple[str, str, str]:
    """Whether the compiler of torch.compile's and AOTInductor's generated C++ code (CXX too, else
    g++) links libstdc++ dynamically; `linkage` is `cxx`'s probe, reused when it is the same compiler."""
    inductor = cxx_runtime.inductor_compiler()
    if inductor != cxx:
        linkage = cxx_runtime.probe(inductor)
    what = f"torch.compile and AOTInductor compile their C++ code with {inductor} (CXX, default g++)"
    if linkage is None:
        return ("warn", f"{what}: could not link and inspect a test library with it", "install binutils and g++")
    if linkage.ok:
        return ("ok", f"{what}: it links libstdc++ dynamically", "")
    return (
        "fail",
        f"{what}: it links libstdc++ statically, so their compiled code carries a second C++ runtime and "
        "crashes (aoti_load_package of an AOTInductor package dies with SIGSEGV)",
        cxx_runtime.fix_message(inductor),
    )


def summary() -> None:
    import torch

    CUDA_HOME = build_config.cpp_extension().CUDA_HOME  # noqa: N806

    nvcc = nvcc_version(CUDA_HOME)
    cxx = os.environ.get("CXX", "c++")
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, torch CUDA {torch.version.cuda}")
    nvcc_text = ".".join(map(str, nvcc)) if nvcc else "not found"
    print(f"nvcc {nvcc_text} (CUDA_HOME={CUDA_HOME}), host compiler {cxx} ({compiler_name(cxx)})")
    default = build_config.default_cuda_arch_list(nvcc)
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST") or f"(default: {default} without a GPU)"
    print(f"CUSTOM_OP_CUDA={os.environ.get('CUSTOM_OP_CUDA', '(auto)')}, TORCH_CUDA_ARCH_LIST={archs}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--summary", action="store_true")
    if parser.parse_args().summary:
        summary()
        return 0
    failed = False
    for status, finding, fix in findings():
        print(f"[{status:4s}] {finding}" + (f"\n       fix: {fix}" if fix else ""))
        failed |= status == "fail"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
