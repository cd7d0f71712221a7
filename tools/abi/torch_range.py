"""The supported torch range, for real (nox -s abi): the CPU-only abi3 library built against one
torch with one C++ compiler (warnings are errors), then installed and tested under every torch of
the range, not only the one it was built against.

    python -m tools.abi.torch_range --torch 2.15.0 --cxx clang++ --runtime 2.11.0 --runtime 2.15.0

Each torch gets a venv in .envs/abi/ (reused), installed hash-checked and from wheels only from
requirements/abi-torch-VERSION-lock.txt (torch and the test tools, made by `nox -s lock`).
PIP_CONSTRAINT is cleared there: a machine-wide pip cap on torch must not decide which torch is tested.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / ".envs" / "abi"
SOURCES = ("setup.py", "pyproject.toml", "README.md", "LICENSE", "custom_op")
# The harness's own tests (the benchmark's runs, the JIT's rebuilds) say nothing about the ABI, nor
# do the multi-process ones (DTensor, DDP: Python over the same kernels), which run once in `nox -s test`.
TEST_ARGS = ("tests/ops", "-q", "-p", "no:cacheprovider", "-m", "not slow and not multiprocess")


def run(*args, **kwargs) -> None:
    print("+ " + " ".join(map(str, args)), flush=True)
    subprocess.run([str(a) for a in args], check=True, **kwargs)


def lock(version: str) -> Path:
    """requirements/abi-torch-VERSION-lock.txt, refused when missing or older than its input."""
    source = ROOT / "requirements" / f"abi-torch-{version}.in"
    locked = source.with_name(f"abi-torch-{version}-lock.txt")
    if not locked.is_file():
        sys.exit(f"abi: no {locked.relative_to(ROOT)}: add {source.relative_to(ROOT)} and run `nox -s lock`")
    made_from = f"# input-sha256: {hashlib.sha256(source.read_bytes()).hexdigest()}\n"
    if made_from not in locked.read_text():
        sys.exit(f"abi: {locked.relative_to(ROOT)} is older than {source.name}: run `nox -s lock`")
    return locked


def install_args(version: str) -> list[str]:
    """pip's arguments for a torch venv: the lock alone, every file hash-checked, wheels only."""
    return ["--require-hashes", "--only-binary", ":all:", "-r", str(lock(version))]


def venv(version: str) -> Path:
    """A venv with torch==version and the test tools, made once (sessions running side by side
    wait for each other's)."""
    path = WORK / f"torch-{version}"
    python = path / "bin" / "python"
    probe = f"import torch, pytest, sys; sys.exit(torch.__version__.split('+')[0] != {version!r})"
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / f"torch-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0:
            return python
        shutil.rmtree(path, ignore_errors=True)
        run(sys.executable, "-m", "venv", path)
        env = dict(os.environ, PIP_CONSTRAINT="/dev/null")
        run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *install_args(version), env=env)
    return python


def build(version: str, cxx: str) -> Path:
    """The wheel built against torch==version with cxx, from a copy of the sources (the checkout's
    own build/ and in-place library stay untouched)."""
    name = f"torch-{version}-{cxx}"
    src, dist = WORK / "src" / name, WORK / "dist" / name
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(dist, ignore_errors=True)
    src.mkdir(parents=True)
    for item in SOURCES:
        (shutil.copytree if (ROOT / item).is_dir() else shutil.copy2)(ROOT / item, src / item)
    for junk in [*src.rglob("*.so"), *src.rglob("__pycache__")]:
        shutil.rmtree(junk) if junk.is_dir() else junk.unlink()
    env = dict(os.environ, CXX=cxx, CUSTOM_OP_WERROR="1", CUSTOM_OP_CUDA="0")
    run(venv(version), "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-build-isolation",
        "--no-deps", ".", "-w", dist, cwd=src, env=env)  # fmt: skip
    (wheel,) = dist.glob("*-abi3-*.whl")
    return wheel


def test(wheel: Path, runtime: str) -> bool:
    """The installed wheel's tests under torch==runtime: the installed library, not the checkout's."""
    python = venv(runtime)
    target = WORK / "run" / f"{wheel.parent.name}-on-{runtime}"
    shutil.rmtree(target, ignore_errors=True)
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--target", target, wheel)
    env = dict(os.environ, PYTHONPATH=str(target), CUSTOM_OP_CUDA="0")
    where = "import custom_op, sys; assert custom_op.LIBRARY_PATH.startswith(sys.argv[1]), custom_op.LIBRARY_PATH"
    run(python, "-c", where, target, cwd=WORK, env=env)
    # The pytest script, unlike python -m pytest, does not put the checkout first on sys.path.
    return subprocess.run([python.parent / "pytest", *TEST_ARGS], cwd=ROOT, env=env).returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", required=True, help="the torch the library is built against")
    parser.add_argument("--cxx", required=True, help="the C++ compiler (CXX)")
    parser.add_argument("--runtime", action="append", required=True, help="a torch to test the build under")
    args = parser.parse_args(argv)
    wheel = build(args.torch, args.cxx)
    failed = [runtime for runtime in args.runtime if not test(wheel, runtime)]
    built = f"built against torch {args.torch} with {args.cxx}"
    if failed:
        print(f"abi: {built}: tests failed under torch {', '.join(failed)}")
        return 1
    print(f"abi: {built}: tests passed under torch {', '.join(args.runtime)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
