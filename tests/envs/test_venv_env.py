"""The venv backend: a hash-locked install, a tampered lock refused, a stale lock reported; and
the choice between the conda and venv backends."""

from __future__ import annotations

import hashlib
import subprocess

import pytest

from tools.envs import choose, installer, paths, venvs


@pytest.fixture
def envs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(installer.INSTALLER_VARIABLE, "pip")  # uv's own path: test_installer.py
    monkeypatch.setattr(paths, "ENVS", tmp_path / "envs")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    return tmp_path / "envs"


def test_locked_venv_is_created_once_and_reused(tmp_path, envs_dir, demo_lock):
    lock = demo_lock(tmp_path)
    prefix = venvs.ensure_venv("demo", lock, log=lambda *a: None)
    out = subprocess.run(
        [prefix / "bin" / "python", "-c", "import demo_pkg; print(demo_pkg.VALUE)"], capture_output=True, text=True
    )
    assert out.stdout.strip() == "42"
    marker = prefix / paths.COMPLETE
    before = marker.stat().st_mtime_ns
    assert venvs.ensure_venv("demo", lock, log=lambda *a: None) == prefix
    assert marker.stat().st_mtime_ns == before  # reused, not reinstalled


def test_tampered_lock_is_refused(tmp_path, envs_dir, demo_wheel, demo_lock):
    wheel, _ = demo_wheel
    lock = demo_lock(tmp_path, wheel, "0" * 64)
    with pytest.raises(subprocess.CalledProcessError):
        venvs.ensure_venv("demo", lock, log=lambda *a: None)
    assert not any(p.name == paths.COMPLETE for p in envs_dir.rglob(paths.COMPLETE))


def test_stale_lock_is_reported_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    source, lock = tmp_path / "venv.in", tmp_path / "venv-lock.txt"
    source.write_text("torch==2.14.1\n")
    lock.write_text(f"{venvs.INPUT_HASH_PREFIX}{paths.sha256_file(source)}\ntorch==2.14.1 --hash=sha256:{'1' * 64}\n")
    venvs.check_lock_fresh(source, lock)
    source.write_text("torch==2.15.0\n")
    with pytest.raises(venvs.StaleLockError, match=r"venv-lock.txt is stale: venv.in changed .* `nox -s lock`"):
        venvs.check_lock_fresh(source, lock)
    lock.unlink()
    with pytest.raises(venvs.StaleLockError, match="is missing"):
        venvs.check_lock_fresh(source, lock)


def test_the_repository_locks_are_fresh():
    venvs.check_lock_fresh(paths.VENV_IN, paths.VENV_LOCK)
    venvs.check_lock_fresh(paths.TOOLS_IN, paths.TOOLS_LOCK)
    venvs.check_lock_fresh(paths.NOX_IN, paths.NOX_LOCK)


def test_backend_choice(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "CONDA_LOCK", tmp_path / "conda-lock.yml")
    monkeypatch.setattr(choose, "_venv", lambda reason, log: venvs.Env("venv", paths.ROOT, {}, reason))
    said = []
    env = choose.project_env(log=said.append)
    assert env.backend == "venv" and "no conda-lock.yml" in env.reason
    assert said and said[-1].startswith("environment: venv")
    monkeypatch.setenv(choose.BACKEND_VARIABLE, "conda")
    with pytest.raises(choose.EnvSetupError, match="no conda-lock.yml.*nox -s lock"):
        choose.project_env(log=said.append)
    monkeypatch.setenv(choose.BACKEND_VARIABLE, "mamba")
    with pytest.raises(choose.EnvSetupError, match="must be auto, conda or venv"):
        choose.project_env(log=said.append)


@pytest.fixture
def tools_lock_files(tmp_path, monkeypatch):
    """tools.in and tools-lock.txt in a temporary checkout; which venv each state asks for."""
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "ENVS", tmp_path / "envs")
    monkeypatch.setattr(paths, "TOOLS_IN", tmp_path / "tools.in")
    monkeypatch.setattr(paths, "TOOLS_LOCK", tmp_path / "tools-lock.txt")
    paths.TOOLS_IN.write_text("py-rattler==0.28.0\npip-tools == 7.6.2  # makes the locks\nruff\n")
    asked = []

    def ensure_venv(name, lock, log=print):
        if "uninstallable" in lock.read_text():
            raise subprocess.CalledProcessError(1, ["pip", "install"])
        asked.append(("locked", name, lock.read_text()))
        return tmp_path / "envs" / name

    monkeypatch.setattr(venvs, "ensure_venv", ensure_venv)

    def ensure_unlocked_venv(name, pins, log=print):
        asked.append((name, pins))
        return tmp_path / "envs" / name

    monkeypatch.setattr(venvs, "ensure_unlocked_venv", ensure_unlocked_venv)
    return asked


def lock_for(source_text: str, extra: str = "") -> str:
    digest = hashlib.sha256(source_text.encode()).hexdigest()
    return f"{venvs.INPUT_HASH_PREFIX}{digest}\n{extra}"


def test_nox_s_lock_runs_whatever_state_the_tools_lock_is_in(tools_lock_files):
    asked, said = tools_lock_files, []
    fresh = lock_for(paths.TOOLS_IN.read_text())
    paths.TOOLS_LOCK.write_text(fresh)
    assert choose.locking_env(log=said.append).backend == "tools" and asked[-1] == ("locked", "tools", fresh)

    paths.TOOLS_LOCK.write_text(lock_for("the tools.in of an older commit\n"))  # stale: the previous pins
    env = choose.locking_env(log=said.append)
    assert env.backend == "tools" and env.reason == "the previous pins"
    assert (
        said[-1] == "tools-lock.txt is stale: tools.in changed since it was locked: locking with what can be installed"
    )

    paths.TOOLS_LOCK.write_text(lock_for("older\n", "uninstallable\n"))  # stale and broken: pip-tools alone
    assert choose.locking_env(log=said.append).backend == "bootstrap"
    assert asked[-1] == ("lock-bootstrap", ["pip-tools == 7.6.2"]) and "cannot be installed" in said[-1]

    paths.TOOLS_LOCK.unlink()  # missing
    assert choose.locking_env(log=said.append).backend == "bootstrap" and "is missing" in said[-1]

    paths.TOOLS_IN.write_text("ruff\n")
    with pytest.raises(choose.EnvSetupError, match=r"tools.in must pin pip-tools"):
        choose.locking_env(log=said.append)
