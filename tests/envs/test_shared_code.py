"""Shared code names no example, so a fork deletes any of them (nox -s fork) and the rest runs: the
package's modules, the benchmark, the suites and the tools reach operators through the registry and
their specs' declarations, never by name; no operator reaches another or the registry; and the
modules the operators import never import the registry back."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "scaffold"))
import examples  # noqa: E402
import new  # noqa: E402
from renaming import Renamer  # noqa: E402

PACKAGE = new.PACKAGE
# What every operator shares. Not here: examples.py, the one place that declares the examples, and
# tests/envs, which tests the scaffold on their names.
SHARED = (f"{PACKAGE}/*.py", f"{PACKAGE}/ops/__init__.py", f"{PACKAGE}/csrc/**/*.*", "bench/*.py", "tests/*.py",
          "tests/ops/*.py", "tests/build/*.py", "tests/deploy/*.py", "tests/fork/*.py", "tools/**/*.py", "noxfile.py")  # fmt: skip
DECLARED = "tools/scaffold/examples.py"
# The package's entry points, which load the registry: `import custom_op` and the JIT loop.
ENTRY_POINTS = ("__init__.py", "jit.py")
CHECKOUT = ("bench", "tests", "tools")  # the checkout's folders, absent from an installed package


def _shared_files() -> list[Path]:
    found = {path for pattern in SHARED for path in ROOT.glob(pattern) if path.is_file()}
    return sorted(path for path in found if path.relative_to(ROOT).as_posix() != DECLARED)


def _code(path: Path) -> str:
    """What the file runs: Python without its comments and docstrings; another source whole."""
    if path.suffix != ".py":
        return path.read_text()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


@pytest.mark.parametrize("example", examples.EXAMPLES)
def test_no_shared_file_names_an_example(example):
    """An example's name in shared code (PyTorch's names of the same words, F.rms_norm, are
    PyTorch's) is a reach that breaks when a fork deletes it: declare it in the op's spec instead."""
    renamer = Renamer(example, "some_op", protected=(PACKAGE,))
    named = []
    for path in _shared_files():
        code = _code(path)
        renamed, _ = renamer.text(code)
        lines = zip(code.splitlines(), renamed.splitlines(), strict=True)
        named += [f"{path.relative_to(ROOT)}: {old.strip()}" for old, changed in lines if old != changed]
    assert named == [], f"shared code names the example {example}:\n" + "\n".join(named)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, dotted name) of each module the file imports; `from . import x` as (1, "x")."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            found += [(node.level, f"{base}.{alias.name}".strip(".")) for alias in node.names]
    return found


OPS = new.operators()


@pytest.mark.skipif(not OPS, reason="no operator in the tree")
@pytest.mark.parametrize("op", OPS)
def test_no_operator_reaches_another_or_the_registry(op):
    """An op's Python imports its own modules (.), the package's shared ones (...) and libraries:
    never the registry (ops) nor another op (..other)."""
    reaching = []
    for path in sorted((ROOT / PACKAGE / "ops" / op).glob("*.py")):
        for level, name in _imports(path):
            first = name.split(".")[0]
            if level == 2 or (level == 3 and first == "ops") or (level == 0 and name.startswith(f"{PACKAGE}.ops")):
                reaching.append(f"{path.name}: {'.' * level}{name}")
    assert reaching == [], f"{op} reaches beyond its folder: {reaching}"


@pytest.mark.parametrize("module", sorted(p.name for p in (ROOT / PACKAGE).glob("*.py") if p.name not in ENTRY_POINTS))
def test_no_shared_module_imports_back_up(module):
    """The modules the ops import (testing.py, checks.py, ...) import neither the registry (a cycle:
    the ops import them) nor the checkout's bench, tests or tools (absent where the package is installed)."""
    path = ROOT / PACKAGE / module
    back = [name for level, name in _imports(path)
            if (level == 1 and name.split(".")[0] == "ops") or (level == 0 and name.split(".")[0] in CHECKOUT)
            or (level == 0 and name.startswith(f"{PACKAGE}.ops"))]  # fmt: skip
    assert back == [], f"{PACKAGE}/{module} imports back up: {back}"


def test_the_operator_suites_do_not_import_the_benchmark():
    """tests/ops checks the ops; what it shares with the benchmark (the transformer block) is the package's."""
    importing = [f"{path.name}: {name}" for path in sorted((ROOT / "tests" / "ops").glob("*.py"))
                 for level, name in _imports(path) if level == 0 and name.split(".")[0] == "bench"]  # fmt: skip
    assert importing == [], f"tests/ops imports bench: {importing}"


def test_the_checks_have_the_same_names_in_python_and_cpp():
    """An op's checks are written once in C++ (csrc/common/checks.h) and once in Python for the fake
    kernels (checks.py): each check_* and fail_* helper exists in both, under the same name."""
    python = ast.parse((ROOT / PACKAGE / "checks.py").read_text())
    in_python = {
        n.name for n in python.body if isinstance(n, ast.FunctionDef) and n.name.startswith(("check_", "fail_"))
    }
    header = (ROOT / PACKAGE / "csrc" / "common" / "checks.h").read_text()
    in_cpp = set(re.findall(r"\b((?:check|fail)_\w+)\(", header))
    assert in_python == in_cpp, (
        f"only in Python: {sorted(in_python - in_cpp)}; only in C++: {sorted(in_cpp - in_python)}"
    )
