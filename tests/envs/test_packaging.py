"""What the distribution is made from: one version, written once; the metadata PyPI shows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def package() -> Path:
    return next(p.parent for p in ROOT.glob("*/_library.py"))  # wherever `nox -s rename` put it


def written_version() -> str:
    """`__version__ = "..."` in the package's __init__.py, read as setuptools reads it (no import)."""
    tree = ast.parse((package() / "__init__.py").read_text())
    values = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [ast.unparse(t) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert len(values) == 1, f"{package().name}/__init__.py must assign __version__ one string literal"
    return values[0]


def test_the_version_is_written_once_in_the_package():
    project = pyproject()
    assert "version" not in project["project"], "pyproject.toml repeats the version: list it in `dynamic` instead"
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == f"{package().name}.__version__"
    assert re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?", written_version())


def test_setuptools_reads_the_version_without_importing_the_package():
    """The package imports torch and its built library; setuptools must not need either (an in-place
    build, a wheel built with --no-build-isolation). The tools venv has no torch, so an import fails."""
    expand = pytest.importorskip("setuptools.config.expand")
    attr = pyproject()["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert expand.read_attr(attr, root_dir=ROOT) == written_version()


def test_the_metadata_pypi_shows():
    project = pyproject()["project"]
    assert project["license"] and project["readme"] == "README.md"
    assert set(project["urls"]) >= {"Homepage", "Source", "Issues"}
    classifiers = project["classifiers"]
    assert not [c for c in classifiers if c.startswith("License ::")], "PEP 639: `license` replaces these"
    floor = re.fullmatch(r">=3\.(\d+)", project["requires-python"]).group(1)
    assert f"Programming Language :: Python :: 3.{floor}" in classifiers
