"""The layouts the image and the GPU job use: environments in a folder outside the checkout,
made by one user and reused by another who cannot write there, and the conda path started
offline once its environment is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tools.envs import __main__ as envs_main
from tools.envs import choose, installer, paths, venvs
from tools.envs.conda import install, solve

OTHER_UID = 1001  # the GPU job's runner account: not the image's uid 1000, not the owner


def test_environments_outside_the_checkout_are_made_and_named_by_their_full_path(tmp_path, monkeypatch, demo_lock):
    checkout, envs = tmp_path / "__w" / "repo" / "repo", tmp_path / "opt" / "envs"
    checkout.mkdir(parents=True)
    monkeypatch.setattr(paths, "ROOT", checkout)
    monkeypatch.setattr(paths, "ENVS", envs)
    monkeypatch.setenv(installer.INSTALLER_VARIABLE, "pip")  # offline: the demo wheel is local, PyPI unasked
    said = []
    prefix = venvs.ensure_venv("demo", demo_lock(tmp_path), log=said.append)
    assert prefix.parent == envs and (prefix / paths.COMPLETE).exists()
    assert said == [
        f"creating {prefix} from {tmp_path / 'lock.txt'} (once per lock) with pip (CUSTOM_OP_INSTALLER=pip)"
    ]
    assert paths.shown(checkout / "requirements" / "venv-lock.txt") == "requirements/venv-lock.txt"


# A Python every uid can run (a venv's interpreter may live in root's home).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root (CI and the image build have it)")
@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no python3 in /usr/bin or /usr/local/bin")
def test_another_uid_reuses_environments_it_cannot_write(demo_wheel, demo_lock):
    with tempfile.TemporaryDirectory() as shared:
        shared = Path(shared)
        shared.chmod(0o755)  # readable by the other uid, writable by the owner only
        shutil.copytree(paths.ROOT / "tools" / "envs", shared / "tools" / "envs")
        (shared / "tools" / "__init__.py").touch()
        wheel = shutil.copy(demo_wheel[0], shared)
        envs = shared / "envs"
        environ = {**os.environ, "CUSTOM_OP_ENVS_DIR": str(envs), "PYTHONPATH": str(shared),
                   installer.INSTALLER_VARIABLE: "pip"}  # fmt: skip
        lock = demo_lock(shared, Path(wheel))
        script = (
            "from pathlib import Path; from tools.envs import venvs; "
            f"print(venvs.ensure_venv('demo', Path({str(lock)!r}), python={SYSTEM_PYTHON!r}))"
        )
        made = subprocess.run([SYSTEM_PYTHON, "-c", script], env=environ, cwd=shared, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        prefix = Path(made.stdout.split()[-1])
        for path in (shared, *shared.rglob("*")):
            if not path.is_symlink():
                path.chmod(path.stat().st_mode & ~0o022 | 0o444 | (0o111 if path.is_dir() else 0))
        python = prefix / "bin" / "python"
        reused = subprocess.run(
            [python, "-c", f"{script}; import demo_pkg; print(demo_pkg.VALUE)"],
            env=environ,
            cwd=shared,
            capture_output=True,
            text=True,
            user=OTHER_UID,
            group=OTHER_UID,
        )
        assert reused.returncode == 0, reused.stderr
        assert reused.stdout.split() == [str(prefix), "42"]  # reused, nothing written, importable


@pytest.fixture
def offline_conda_project(tmp_path, local_channel, monkeypatch):
    """A repository whose conda-lock.yml was made from a channel that is gone afterwards."""
    channel = shutil.copytree(local_channel, tmp_path / "channel")
    (tmp_path / "environment.yml").write_text(
        f"channels:\n  - {channel.as_uri()}\ndependencies:\n  - demo-tool\nplatforms:\n  - linux-64\n"
    )
    (tmp_path / "virtual-packages.yml").write_text("subdirs:\n  linux-64:\n    packages:\n      __glibc: '2.28'\n")
    for name, value in {
        "ROOT": tmp_path,
        "ENVS": tmp_path / "envs",
        "CONDA_LOCK": tmp_path / "conda-lock.yml",
        "ENVIRONMENT_YML": tmp_path / "environment.yml",
        "VIRTUAL_PACKAGES_YML": tmp_path / "virtual-packages.yml",
    }.items():
        monkeypatch.setattr(paths, name, value)
    solve.lock(
        environment_yml=paths.ENVIRONMENT_YML,
        virtual_packages_yml=paths.VIRTUAL_PACKAGES_YML,
        lockfile=paths.CONDA_LOCK,
        cache_dir=tmp_path / "cache",
        log=lambda *a: None,
    )
    return channel


def test_the_conda_path_starts_offline_once_installed(offline_conda_project, monkeypatch):
    lock_hash = paths.sha256_file(paths.CONDA_LOCK)
    prefix = paths.ENVS / f"conda-{lock_hash[:12]}"
    install.install(paths.CONDA_LOCK, prefix, cache_dir=paths.ENVS / "pkgs", log=lambda *a: None)
    (prefix / paths.ACTIVATION).write_text(json.dumps({"CONDA_PREFIX": str(prefix)}))
    (prefix / paths.COMPLETE).write_text(lock_hash + "\n")
    shutil.rmtree(offline_conda_project)  # the channel is gone: offline
    shutil.rmtree(paths.ENVS / "pkgs")  # and so is the package cache (a build-time cache mount)

    status = envs_main.conda_status()
    assert status["usable"] and status["reason"] == "conda-lock.yml is fresh and installed"

    def no_install(*args, **kwargs):
        raise AssertionError(f"the installed environment was reinstalled: {args}")

    monkeypatch.setattr(subprocess, "run", no_install)
    tools = venvs.Env("tools", Path(sys.prefix))
    env = choose._conda(tools, status["reason"], log=lambda *a: None)
    assert env.prefix == prefix and env.environ["CONDA_PREFIX"] == str(prefix)
    assert (prefix / "bin" / "demo-tool").exists()


def test_the_conda_path_without_its_environment_says_why_its_channel_is_needed(offline_conda_project):
    shutil.rmtree(offline_conda_project)
    status = envs_main.conda_status()
    assert not status["usable"] and not status["stale"]  # the venv is used instead, and the reason said
    assert status["reason"] == f"local channel {offline_conda_project} has no noarch/repodata.json"
