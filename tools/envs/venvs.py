"""Virtual environments from hash-locked requirements (standard library only).

A venv lives in .envs/<name>-<lock hash>/ and is reused until its lock file changes; it is
complete only once its marker file is written, so an interrupted install starts over. uv installs
into it where uv is found, pip otherwise (installer.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import installer, paths

INPUT_HASH_PREFIX = "# input-sha256: "
# Every venv is installed from wheels: a source distribution's build would run its code.
WHEELS_ONLY = ("--only-binary", ":all:")


class StaleLockError(RuntimeError):
    """A lock no longer matches the file it was made from."""


@dataclass
class Env:
    """An environment the sessions run commands in."""

    backend: str  # "venv", "conda" or "tools"
    prefix: Path
    environ: dict[str, str] = field(default_factory=dict)  # set over the caller's environment
    reason: str = ""

    @property
    def python(self) -> str:
        return str(self.prefix / "bin" / "python")

    def bin(self, name: str) -> str:
        return str(self.prefix / "bin" / name)


def check_lock_fresh(source: Path, lock: Path) -> None:
    """Raises StaleLockError when `lock` is missing or was made from another `source`."""
    fix = "Run `nox -s lock` (it needs PyPI) to refresh it."
    if not lock.exists():
        raise StaleLockError(f"{paths.shown(lock)} is missing. {fix}")
    recorded = next(
        (
            line[len(INPUT_HASH_PREFIX) :].strip()
            for line in lock.read_text().splitlines()
            if line.startswith(INPUT_HASH_PREFIX)
        ),
        None,
    )
    if recorded != paths.sha256_file(source):
        what = f"{paths.shown(lock)} is stale: {paths.shown(source)}"
        raise StaleLockError(f"{what} changed since it was locked. {fix}")


def _site_packages(prefix: Path) -> Path:
    found = sorted(prefix.glob("lib/python3*/site-packages"))
    if not found:
        raise RuntimeError(f"no site-packages under {prefix}")
    return found[-1]


def ensure_venv(name: str, lock: Path, python: str = sys.executable, log=print) -> Path:
    """The venv for `lock`, created and installed (pip --require-hashes) if needed."""
    lock_hash = paths.sha256_file(lock)
    return _venv_once(
        name, lock_hash, [*WHEELS_ONLY, "--require-hashes", "--no-deps", "-r", str(lock)],
        f"from {paths.shown(lock)} (once per lock)", python, log,
    )  # fmt: skip


def ensure_unlocked_venv(name: str, requirements: list[str], python: str = sys.executable, log=print) -> Path:
    """A venv of pinned `requirements` without hashes: only for bootstrapping the tool that makes
    the locks when its own lock cannot be used."""
    key = hashlib.sha256("\n".join(requirements).encode()).hexdigest()
    what = f"with {' '.join(requirements)} (not hash-checked: it only makes locks)"
    return _venv_once(name, key, [*WHEELS_ONLY, *requirements], what, python, log)


def _venv_once(name: str, key: str, pip_args: list[str], what: str, python: str, log) -> Path:
    """ENVS/<name>-<key[:12]>, made with `pip install pip_args` (or uv's) unless its marker says it is complete."""
    prefix = paths.ENVS / f"{name}-{key[:12]}"
    marker = prefix / paths.COMPLETE
    if marker.exists() and marker.read_text().strip() == key:
        return prefix
    chosen = installer.choose()  # before anything is removed: a forced uv that is missing stops here
    for old in paths.ENVS.glob(f"{name}-*"):  # an older lock's environment, or an interrupted one
        shutil.rmtree(old, ignore_errors=True)
    log(f"creating {paths.shown(prefix)} {what} with {chosen.name} ({chosen.reason}){paths.other_envs_dir_note()}")
    # The standard venv with ensurepip's bundled pip, offline: uv's --seed would fetch pip unhashed.
    subprocess.run([python, "-m", "venv", str(prefix)], check=True)
    # Quiet: the installer's list of every package is the lock's; errors still show.
    commands, environ = installer.install_commands(chosen, str(prefix / "bin" / "python"), ["--quiet", *pip_args])
    for command in commands:
        subprocess.run(command, env={**os.environ, **environ}, check=True)
    marker.write_text(key + "\n")
    return prefix


def venv_environ(prefix: Path, with_cuda_toolchain: bool) -> dict[str, str]:
    """Variables that make commands run as if the venv were activated."""
    environ = {"VIRTUAL_ENV": str(prefix), "PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    if with_cuda_toolchain:
        from tools import pip_cuda_toolchain

        try:
            home = pip_cuda_toolchain.cuda_home(_site_packages(prefix))
        except pip_cuda_toolchain.ToolchainError:
            return environ  # a CPU-only lock: no toolkit, CPU kernels only
        environ["CUDA_HOME"] = str(home)
        environ["PATH"] = f"{home / 'bin'}{os.pathsep}{environ['PATH']}"
    return environ
