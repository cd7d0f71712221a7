"""The conda path end to end, offline: lock against a local channel, install the lock with
sha256 checks, refuse a tampered package, detect a stale lock, run a command in the environment."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import yaml

from tools.envs import conda_env


def lock(project):
    return conda_env.lock(
        environment_yml=project / "environment.yml",
        virtual_packages_yml=project / "virtual-packages.yml",
        lockfile=project / "conda-lock.yml",
        cache_dir=project / "cache",
        log=lambda *a: None,
    )


def test_lock_writes_standard_conda_lock_file(project):
    lock(project)
    data = yaml.safe_load((project / "conda-lock.yml").read_text())
    assert data["version"] == 1
    names = {(p["name"], p["version"]) for p in data["package"]}
    assert names == {("demo-tool", "0.3"), ("demo-lib", "1.0")}  # demo-lib <2 honoured
    for package in data["package"]:
        assert len(package["hash"]["sha256"]) == 64 and package["platform"] == "linux-64"
    assert set(data["metadata"]["content_hash"]) == {"linux-64"}
    # conda-lock itself accepts it
    from conda_lock.lockfile import parse_conda_lock_file

    assert len(parse_conda_lock_file(project / "conda-lock.yml").package) == 2


def test_install_and_run_inside_the_environment(project):
    lock(project)
    prefix = project / "env"
    assert conda_env.install(project / "conda-lock.yml", prefix, cache_dir=project / "pkgs", log=lambda *a: None) == 2
    assert (prefix / "conda-meta").is_dir()
    environ = conda_env.activated_environ(prefix)
    assert environ["CONDA_PREFIX"] == str(prefix)
    assert environ["DEMO_TOOL_HOME"] == f"{prefix}/share/demo-tool"  # the activation script ran
    out = subprocess.run(["demo-tool"], env={**os.environ, **environ}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"demo-tool 1.0 {prefix}/share/demo-tool"


def test_tampered_package_is_refused(project, local_channel, tmp_path):
    lock(project)
    data = yaml.safe_load((project / "conda-lock.yml").read_text())
    tool = next(p for p in data["package"] if p["name"] == "demo-tool")
    tool["hash"]["sha256"] = "0" * 64  # the lock no longer matches the package
    (project / "conda-lock.yml").write_text(yaml.safe_dump(data))
    with pytest.raises(
        conda_env.HashMismatchError,
        match=r"demo-tool-0.3-h0_0.conda .* has sha256 [0-9a-f]{64}, but the lock says 0{64}",
    ):
        conda_env.install(project / "conda-lock.yml", project / "env", cache_dir=tmp_path / "pkgs", log=lambda *a: None)
    assert not (project / "env" / "bin" / "demo-tool").exists()


def test_stale_lock_is_detected_offline(project):
    lock(project)
    conda_env.check_fresh(project / "conda-lock.yml", project / "environment.yml", project / "virtual-packages.yml")
    env_yml = project / "environment.yml"
    env_yml.write_text(env_yml.read_text().replace("demo-lib <2", "demo-lib >=2"))
    with pytest.raises(conda_env.StaleCondaLockError, match=r"stale for linux-64: .*Run `nox -s lock`"):
        conda_env.check_fresh(project / "conda-lock.yml", env_yml, project / "virtual-packages.yml")


def test_unreachable_channel_fails_fast(project):
    start = time.monotonic()
    with pytest.raises(conda_env.ChannelUnreachableError, match="cannot be reached.*--channel"):
        conda_env.check_reachable(["http://127.0.0.1:9/conda-forge"], timeout=2)
    assert time.monotonic() - start < 5
    with pytest.raises(conda_env.ChannelUnreachableError, match="no noarch/repodata.json"):
        conda_env.check_reachable([str(project / "missing-channel")])


def test_lock_against_a_channel_override(project, local_channel):
    env_yml = project / "environment.yml"
    env_yml.write_text(env_yml.read_text().replace(local_channel.as_uri(), "conda-forge"))
    conda_env.lock(
        environment_yml=env_yml,
        virtual_packages_yml=project / "virtual-packages.yml",
        lockfile=project / "conda-lock.yml",
        channels=[str(local_channel)],
        cache_dir=project / "cache",
        log=lambda *a: None,
    )
    assert "demo-tool" in (project / "conda-lock.yml").read_text()
