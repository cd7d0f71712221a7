"""What the distribution and the commit hooks are made from: one version, written once; the
metadata PyPI shows; pre-commit's tools at the versions `nox -s lint` installs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

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


# --- pre-commit runs nox -s lint's tools at the lock's versions ------------------------------------


def locked_versions() -> dict[str, str]:
    text = (ROOT / "requirements" / "tools-lock.txt").read_text()
    return {m[0].lower(): m[1] for m in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", text, re.M)}


def hooks() -> list[dict]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    return [hook for repo in config["repos"] for hook in repo["hooks"]]


def lint_tools() -> set[str]:
    """The executables noxfile.py's lint session runs (`tools.bin("NAME")`)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    lint = next((f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "lint"), None)
    assert lint is not None, "noxfile.py has no `def lint`: point this test at where the lint tools are run"
    return {
        node.args[0].value
        for node in ast.walk(lint)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith(".bin")
        and isinstance(node.args[0], ast.Constant)
    }


def test_the_hooks_pin_the_versions_nox_s_lint_installs():
    locked = locked_versions()
    for hook in hooks():
        assert hook.get("language") == "python", f"hook {hook['id']}: a python hook installs the pinned tool"
        for requirement in hook.get("additional_dependencies", []):
            name, _, version = requirement.partition("==")
            assert name.lower() in locked, f"hook {hook['id']}: {name} is not in requirements/tools-lock.txt"
            assert version == locked[name.lower()], (
                f"hook {hook['id']} pins {requirement}, requirements/tools-lock.txt locks "
                f"{name}=={locked[name.lower()]}: set .pre-commit-config.yaml's line to {name}=={locked[name.lower()]}"
            )


def test_the_hooks_run_every_tool_of_nox_s_lint():
    run = {hook["entry"].split()[0] for hook in hooks()}
    assert lint_tools() <= run, f"nox -s lint runs {sorted(lint_tools() - run)}, which no pre-commit hook runs"
