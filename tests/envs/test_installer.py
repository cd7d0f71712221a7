"""uv or pip for the hash-locked venvs: which one is used and when, the uv command line, pip's
settings (indexes, local wheels, constraints, CA bundle) carried over to uv."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from tools.envs import installer, paths, pip_settings, venvs

VAR = installer.INSTALLER_VARIABLE


def executable(path, text="#!/bin/sh\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_uv_beside_the_running_python_comes_before_uv_on_path(tmp_path):
    beside, on_path = tmp_path / "venv-bin" / "uv", tmp_path / "path-bin" / "uv"
    executable(on_path)
    assert installer.find_uv(str(beside.parent), str(on_path.parent)) == str(on_path)
    executable(beside)
    assert installer.find_uv(str(beside.parent), str(on_path.parent)) == str(beside)
    beside.chmod(0o644)  # not executable: not a uv to run
    on_path.unlink()
    assert installer.find_uv(str(beside.parent), str(on_path.parent)) is None


def test_uv_when_found_pip_when_not_or_when_forced():
    found, missing = (lambda: "/opt/uv"), (lambda: None)
    assert installer.choose({}, found) == installer.Installer("uv", "/opt/uv", "found /opt/uv")
    assert installer.choose({VAR: "auto"}, missing).name == "pip"
    assert installer.choose({VAR: "pip"}, found).name == "pip"
    assert installer.choose({VAR: "uv"}, found).uv == "/opt/uv"
    with pytest.raises(installer.InstallerError, match=rf"{VAR}=uv but no uv was found.*nox-lock.txt"):
        installer.choose({VAR: "uv"}, missing)
    with pytest.raises(installer.InstallerError, match="must be auto, uv or pip, got 'conda'"):
        installer.choose({VAR: "conda"}, found)


LISTING = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/old-ca.pem'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/srv/overridden'
global.index-url='https://mirror.example/simple'
install.index-url='https://install-mirror.example/simple'
download.no-index='1'
"""


def test_pip_settings_are_read_with_pips_precedence():
    assert pip_settings.parse(LISTING) == {
        "cert": "/etc/ssl/certs/ca-certificates.crt",  # PIP_CERT over pip.conf
        "find-links": "/opt/wheels",
        "constraint": "/etc/xdg/pip/constraints.txt",
        "extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple",
        "index-url": "https://install-mirror.example/simple",  # [install] over [global]
    }  # [download] does not apply to installs


def test_the_uv_commands_ask_for_what_pip_would_do():
    settings = pip_settings.parse(LISTING) | {"no-index": "true"}
    lock = ["--require-hashes", "--no-deps", "-r", "requirements/venv-lock.txt"]
    install = [
        "/bin/uv", "pip", "install", "--python", ".envs/venv-1/bin/python",
        "--index-strategy", "unsafe-best-match", "--compile-bytecode",
        "--default-index", "https://install-mirror.example/simple",
        "--index", "file:///opt/pypi/simple", "--index", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--no-index",
    ]  # fmt: skip
    cap = ["--constraints", "/etc/xdg/pip/constraints.txt"]
    # A hashed lock: its pins checked against pip's cap without --require-hashes (uv refuses a cap
    # there), then installed hash-checked.
    assert installer.uv_commands("/bin/uv", ".envs/venv-1/bin/python", lock, settings) == [
        [*install, "--dry-run", "--quiet", *cap, "--no-deps", "-r", "requirements/venv-lock.txt"],
        [*install, *lock],
    ]
    # Unlocked pins (the lock bootstrap): the cap goes with the install itself.
    assert installer.uv_commands("/bin/uv", ".envs/venv-1/bin/python", ["pip-tools==7.6.2"], settings) == [
        [*install, *cap, "pip-tools==7.6.2"]
    ]
    assert installer.uv_commands("uv", "python", lock, {}) == [
        ["uv", "pip", "install", "--python", "python", *installer.UV_AS_PIP, *lock]
    ]


def test_pips_ca_bundle_reaches_uv_unless_uv_is_given_one():
    settings = {"cert": "/etc/ssl/certs/ca-certificates.crt"}
    assert pip_settings.uv_environ(settings, {}) == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    assert pip_settings.uv_environ(settings, {"SSL_CERT_FILE": "/mine.pem"}) == {}
    assert pip_settings.uv_environ(settings, {"UV_SYSTEM_CERTS": "1"}) == {}
    assert pip_settings.uv_environ({}, {}) == {}


@pytest.fixture
def envs_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "ENVS", tmp_path / "envs")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    # pip's settings from these variables alone: no pip.conf of the machine's
    for name in [k for k in os.environ if k.startswith(("PIP_", "UV_"))] + ["SSL_CERT_FILE"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    (tmp_path / "cap.txt").write_text("demo-pkg<=0.1\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(tmp_path / "cap.txt"))
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "proxy-ca.pem"))
    return tmp_path / "envs"


@pytest.fixture
def fake_uv(tmp_path, monkeypatch):
    """A uv that records its arguments and the CA bundle it was given, one line each."""
    record = tmp_path / "uv-calls.txt"
    uv = executable(
        tmp_path / "fake-bin" / "uv",
        f'#!/bin/sh\nprintf "%s " "$@" >> {record}\nprintf "\\nSSL_CERT_FILE=%s\\n" "$SSL_CERT_FILE" >> {record}\n',
    )
    monkeypatch.setattr(installer, "find_uv", lambda: str(uv))
    monkeypatch.setenv(VAR, "auto")
    return record


def test_a_venv_is_filled_by_uv_with_pips_settings_and_ca(tmp_path, envs_dir, fake_uv, demo_lock):
    lock = demo_lock(tmp_path)
    said = []
    prefix = venvs.ensure_venv("demo", lock, log=said.append)
    check, check_cert, install, install_cert = fake_uv.read_text().splitlines()
    expected = installer.uv_commands(
        "uv", str(prefix / "bin" / "python"),
        ["--quiet", *venvs.WHEELS_ONLY, "--require-hashes", "--no-deps", "-r", str(lock)],
        {"find-links": str(tmp_path / "wheels"), "constraint": str(tmp_path / "cap.txt")},
    )  # fmt: skip
    assert [shlex.split(check), shlex.split(install)] == [command[1:] for command in expected]
    assert check_cert == install_cert == f"SSL_CERT_FILE={tmp_path / 'proxy-ca.pem'}"
    assert "with uv (found " in said[-1]
    assert (prefix / "bin" / "pip").exists()  # the venv's own pip, as pip-made venvs have it


def test_pip_fills_the_venv_when_forced_though_uv_is_there(tmp_path, envs_dir, fake_uv, demo_lock, monkeypatch):
    monkeypatch.setenv(VAR, "pip")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # the demo wheel is local: nothing to fetch
    monkeypatch.delenv("PIP_CERT")  # offline: no CA needed (pip loads one it is given even so)
    said = []
    prefix = venvs.ensure_venv("demo", demo_lock(tmp_path), log=said.append)
    out = subprocess.run([prefix / "bin" / "python", "-c", "import demo_pkg"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert not fake_uv.exists() and f"with pip ({VAR}=pip)" in said[-1]


def test_a_forced_uv_that_is_missing_stops_before_anything_is_removed(tmp_path, envs_dir, monkeypatch):
    monkeypatch.setenv(VAR, "uv")
    monkeypatch.setattr(installer, "find_uv", lambda: None)
    (envs_dir / "demo-0123456789ab").mkdir(parents=True)  # an older lock's venv
    lock = tmp_path / "lock.txt"
    lock.write_text("demo-pkg==0.1\n")
    with pytest.raises(installer.InstallerError):
        venvs.ensure_venv("demo", lock, log=lambda *a: None)
    assert (envs_dir / "demo-0123456789ab").is_dir()


# nox -s test names the uv that made the environments (the tools venv, where this runs, has none).
REAL_UV = installer.find_uv() or os.environ.get(installer.TEST_UV_VARIABLE)


@pytest.mark.skipif(REAL_UV is None, reason=f"no uv beside this Python, on PATH or in {installer.TEST_UV_VARIABLE}")
def test_a_real_uv_installs_the_lock_and_refuses_a_tampered_one(tmp_path, envs_dir, demo_wheel, demo_lock, monkeypatch):
    monkeypatch.setattr(installer, "find_uv", lambda: REAL_UV)
    monkeypatch.setenv(VAR, "uv")
    monkeypatch.setenv("UV_OFFLINE", "1")  # the demo wheel is local: nothing to fetch
    monkeypatch.delenv("PIP_CERT", raising=False)  # offline: no CA needed
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    prefix = venvs.ensure_venv("demo", demo_lock(tmp_path), log=lambda *a: None)
    out = subprocess.run([prefix / "bin" / "python", "-c", "import demo_pkg; print(demo_pkg.VALUE)"],
                         capture_output=True, text=True)  # fmt: skip
    assert out.stdout.strip() == "42", out.stderr
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    with pytest.raises(subprocess.CalledProcessError):
        venvs.ensure_venv("demo", demo_lock(tampered, demo_wheel[0], "0" * 64), log=lambda *a: None)
    (tmp_path / "cap.txt").write_text("demo-pkg<0.1\n")  # pip's cap below the pin: uv fails as pip would
    capped = tmp_path / "capped"
    capped.mkdir()
    with pytest.raises(subprocess.CalledProcessError):
        venvs.ensure_venv("demo", demo_lock(capped), log=lambda *a: None)
