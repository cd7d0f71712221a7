"""Offline fixtures: a local conda channel built with py-rattler-build, and a tiny wheel."""

from __future__ import annotations

import asyncio
import datetime
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.envs import paths

rattler = pytest.importorskip("rattler", reason="the conda-path tests run in the tools venv (nox -s test)")
rattler_build = pytest.importorskip("rattler_build", reason="the conda-path tests run in the tools venv")

FIXED_TIME = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture(autouse=True)
def _no_other_envs_dir(monkeypatch):
    """Messages as in a shell set up for this checkout: a fork's tests pass where the template's
    CUSTOM_OP_ENVS_DIR (the name before `nox -s rename`) is still exported."""
    for name in paths.other_envs_dirs():
        monkeypatch.delenv(name)


def _package(channel: Path, staging: Path, name: str, version: str, files: dict[str, str], depends=()):
    root = staging / f"{name}-{version}"
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if relative.startswith("bin/"):
            path.chmod(0o755)
    rattler_build.assemble_package(
        name=name,
        version=version,
        target_platform="noarch",
        build_string="h0_0",
        output_dir=channel / "noarch",
        files_dir=root,
        depends=list(depends),
        noarch="generic",
        timestamp=FIXED_TIME,
    )


@pytest.fixture(scope="session")
def local_channel(tmp_path_factory) -> Path:
    """noarch packages: a tool with an activation script, the library it needs, a newer library."""
    base = tmp_path_factory.mktemp("channel")
    channel, staging = base / "channel", base / "staging"
    (channel / "noarch").mkdir(parents=True)
    _package(channel, staging, "demo-lib", "1.0", {"share/demo-lib/VERSION": "1.0\n"})
    _package(channel, staging, "demo-lib", "2.0", {"share/demo-lib/VERSION": "2.0\n"})
    _package(
        channel,
        staging,
        "demo-tool",
        "0.3",
        {
            "bin/demo-tool": (
                '#!/bin/sh\necho "demo-tool $(cat "$CONDA_PREFIX/share/demo-lib/VERSION") $DEMO_TOOL_HOME"\n'
            ),
            "etc/conda/activate.d/demo-tool.sh": 'export DEMO_TOOL_HOME="$CONDA_PREFIX/share/demo-tool"\n',
        },
        depends=["demo-lib >=1.0"],
    )
    asyncio.run(rattler.index.index_fs(channel, write_zst=False, write_shards=False, force=True))
    return channel


@pytest.fixture
def project(tmp_path, local_channel) -> Path:
    """An environment.yml and virtual-packages.yml locked against the local channel."""
    (tmp_path / "environment.yml").write_text(
        f"channels:\n  - {local_channel.as_uri()}\ndependencies:\n  - demo-tool\n  - demo-lib <2\n"
        "platforms:\n  - linux-64\n"
    )
    (tmp_path / "virtual-packages.yml").write_text(
        "subdirs:\n  linux-64:\n    packages:\n      __glibc: '2.28'\n      __cuda: '13.0'\n"
    )
    return tmp_path


@pytest.fixture
def demo_wheel(tmp_path):
    """A tiny wheel built offline, and its sha256."""
    project = tmp_path / "demo"
    (project / "demo_pkg").mkdir(parents=True)
    (project / "demo_pkg" / "__init__.py").write_text("VALUE = 42\n")
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "demo-pkg"
            version = "0.1"
            """
        )
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-build-isolation",
            "--no-deps",
            str(project),
            "-w",
            str(wheels),
        ],
        check=True,
    )
    wheel = next(wheels.glob("demo_pkg-0.1-*.whl"))
    return wheel, paths.sha256_file(wheel)


@pytest.fixture
def demo_lock(demo_wheel):
    """write(folder, wheel=the demo wheel, sha256=its hash): a lock of the demo wheel in folder."""

    def write(folder: Path, wheel: Path | None = None, sha256: str | None = None) -> Path:
        lock = folder / "lock.txt"
        lock.write_text(
            f"--find-links {(wheel or demo_wheel[0]).parent}\ndemo-pkg==0.1 --hash=sha256:{sha256 or demo_wheel[1]}\n"
        )
        return lock

    return write
