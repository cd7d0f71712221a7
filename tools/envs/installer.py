"""Which installer fills the hash-locked venvs, and its command line (standard library only).

uv where it is found (beside the Python that runs Nox, where requirements/nox-lock.txt puts it,
else on PATH), pip otherwise; CUSTOM_OP_INSTALLER=uv or pip forces one. Both install the same
lock with --require-hashes, from the same indexes and under the same constraints.
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from . import pip_settings

INSTALLER_VARIABLE = "CUSTOM_OP_INSTALLER"  # auto (default), uv or pip
# Set by `nox -s test` for tests/envs, which runs in the tools venv (no uv of its own): the uv that made
# the environments, for the test of a real uv install.
TEST_UV_VARIABLE = "CUSTOM_OP_TEST_UV"

# pip's behaviour, asked of uv: every index weighed for each package (the hashes pin the files, so
# no index can substitute one), and bytecode compiled at install, as a read-only environment needs.
UV_AS_PIP = ("--index-strategy", "unsafe-best-match", "--compile-bytecode")


class InstallerError(RuntimeError):
    """CUSTOM_OP_INSTALLER asks for what cannot be had."""


@dataclass(frozen=True)
class Installer:
    name: str  # "uv" or "pip"
    uv: str | None = None  # the uv executable, for name == "uv"
    reason: str = ""


def find_uv(scripts: str | None = None, path: str | None = None) -> str | None:
    """The uv beside the running Python (pinned in nox-lock.txt) before any uv on PATH."""
    beside = Path(scripts or sysconfig.get_path("scripts")) / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uv", path=path)


def choose(environ: dict[str, str] | None = None, find=None) -> Installer:
    environ = os.environ if environ is None else environ
    choice = environ.get(INSTALLER_VARIABLE, "auto").strip() or "auto"
    if choice not in ("auto", "uv", "pip"):
        raise InstallerError(f"{INSTALLER_VARIABLE} must be auto, uv or pip, got {choice!r}")
    if choice == "pip":
        return Installer("pip", reason=f"{INSTALLER_VARIABLE}=pip")
    uv = (find or find_uv)()
    if uv:
        return Installer("uv", uv, f"{INSTALLER_VARIABLE}=uv" if choice == "uv" else f"found {uv}")
    if choice == "uv":
        raise InstallerError(
            f"{INSTALLER_VARIABLE}=uv but no uv was found beside this Python or on PATH: install Nox from "
            f"requirements/nox-lock.txt (it brings uv), or `pip install uv`, or set {INSTALLER_VARIABLE}=pip"
        )
    return Installer("pip", reason="no uv found")


def uv_commands(uv: str, python: str, args: list[str], settings: dict[str, str]) -> list[list[str]]:
    """`uv pip install args` with pip's settings. uv refuses any constraint but an == pin under
    --require-hashes, so a hashed lock is first checked against pip's constraints in a dry run (it
    fails where pip would, on a pin above a cap), then installed."""
    install = [uv, "pip", "install", "--python", python, *UV_AS_PIP, *pip_settings.uv_index_options(settings)]
    caps = pip_settings.uv_constraint_options(settings)
    if not caps or "--require-hashes" not in args:
        return [[*install, *caps, *args]]
    unhashed = [arg for arg in args if arg not in ("--require-hashes", "--quiet")]  # the dry run is quiet
    return [[*install, "--dry-run", "--quiet", *caps, *unhashed], [*install, *args]]


def install_commands(installer: Installer, python: str, args: list[str]) -> tuple[list[list[str]], dict[str, str]]:
    """The commands that run `pip install args` into the venv of `python`, and what they add to the
    environment."""
    if installer.name == "pip":
        return [[python, "-m", "pip", "install", *args]], {}
    settings = pip_settings.read(python)  # the venv's own pip: what the fallback would use
    return uv_commands(installer.uv, python, args, settings), pip_settings.uv_environ(settings, dict(os.environ))
