"""Chooses and prepares the environment the Nox sessions share (standard library only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from . import paths, venvs
from .venvs import Env, StaleLockError

BACKEND_VARIABLE = "CUSTOM_OP_ENV"  # auto (default), conda or venv


class EnvSetupError(RuntimeError):
    pass


def tools_env(log=print) -> Env:
    venvs.check_lock_fresh(paths.TOOLS_IN, paths.TOOLS_LOCK)
    prefix = venvs.ensure_venv("tools", paths.TOOLS_LOCK, log=log)
    return Env(
        "tools", prefix, {**venvs.venv_environ(prefix, with_cuda_toolchain=False), "PYTHONPATH": str(paths.ROOT)}
    )


def locking_env(log=print) -> Env:
    """What `nox -s lock` runs pip-compile with, whatever state requirements/tools-lock.txt is in:
    fresh, it is the tools venv; stale, the venv of the previous pins (hash-checked); missing or not
    installable, a venv of pip-tools alone at the version tools.in pins."""
    try:
        return tools_env(log)
    except StaleLockError as error:
        log(f"{str(error).split('. Run')[0]}: locking with what can be installed")
    if paths.TOOLS_LOCK.exists():
        try:
            prefix = venvs.ensure_venv("tools", paths.TOOLS_LOCK, log=log)
            return Env("tools", prefix, venvs.venv_environ(prefix, with_cuda_toolchain=False), "the previous pins")
        except subprocess.CalledProcessError:
            log(f"{paths.shown(paths.TOOLS_LOCK)} cannot be installed: bootstrapping pip-tools alone")
    pin = next((line.split("#")[0].strip() for line in paths.TOOLS_IN.read_text().splitlines()
                if line.replace(" ", "").startswith("pip-tools==")), None)  # fmt: skip
    if pin is None:
        raise EnvSetupError(
            f"{paths.shown(paths.TOOLS_IN)} must pin pip-tools (pip-tools==X.Y.Z): `nox -s lock` uses it"
        )
    prefix = venvs.ensure_unlocked_venv("lock-bootstrap", [pin], log=log)
    return Env("bootstrap", prefix, venvs.venv_environ(prefix, with_cuda_toolchain=False), pin)


def _venv(reason: str, log) -> Env:
    venvs.check_lock_fresh(paths.VENV_IN, paths.VENV_LOCK)
    prefix = venvs.ensure_venv("venv", paths.VENV_LOCK, log=log)
    return Env("venv", prefix, venvs.venv_environ(prefix, with_cuda_toolchain=True), reason)


def _conda(tools: Env, reason: str, log) -> Env:
    lock_hash = paths.sha256_file(paths.CONDA_LOCK)
    prefix = paths.ENVS / f"conda-{lock_hash[:12]}"
    marker = prefix / paths.COMPLETE
    if not (marker.exists() and marker.read_text().strip() == lock_hash):
        for old in paths.ENVS.glob("conda-*"):  # an older lock's environment, or an interrupted one
            shutil.rmtree(old, ignore_errors=True)
        log(f"creating {paths.shown(prefix)} from conda-lock.yml (once per lock){paths.other_envs_dir_note()}")
        subprocess.run(
            [tools.python, "-m", "tools.envs", "install-conda", str(prefix)],
            env={**os.environ, **tools.environ},
            check=True,
        )
        marker.write_text(lock_hash + "\n")
    environ = json.loads((prefix / paths.ACTIVATION).read_text())
    return Env("conda", prefix, environ, reason)


def project_env(log=print) -> Env:
    """The shared environment: conda when conda-lock.yml exists and can be used, else venv."""
    choice = os.environ.get(BACKEND_VARIABLE, "auto").strip() or "auto"
    if choice not in ("auto", "conda", "venv"):
        raise EnvSetupError(f"{BACKEND_VARIABLE} must be auto, conda or venv, got {choice!r}")
    if choice == "venv":
        env = _venv(f"{BACKEND_VARIABLE}=venv", log)
    elif not paths.CONDA_LOCK.exists():
        if choice == "conda":
            raise EnvSetupError(
                f"{BACKEND_VARIABLE}=conda but there is no conda-lock.yml: run `nox -s lock` where conda-forge "
                "can be reached (or the lock workflow)"
            )
        env = _venv(
            "no conda-lock.yml: the hash-locked requirements/venv-lock.txt; `nox -s lock` makes a "
            "conda-lock.yml where conda-forge can be reached",
            log,
        )
    else:
        tools = tools_env(log)
        result = subprocess.run(
            [tools.python, "-m", "tools.envs", "check-conda"],
            env={**os.environ, **tools.environ},
            capture_output=True,
            text=True,
            check=True,
        )
        status = json.loads(result.stdout)
        if status.get("warning"):
            log(status["warning"])
        if status["usable"]:
            env = _conda(tools, status["reason"], log)
        elif choice == "conda" or status["stale"]:
            raise EnvSetupError(status["reason"])
        else:
            env = _venv(f"conda-lock.yml cannot be used here: {status['reason']}", log)
    log(f"environment: {env.backend} at {paths.shown(env.prefix)} ({env.reason})")
    return env
