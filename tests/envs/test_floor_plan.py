"""Every operator folder follows one floor plan (tools/scaffold/floor_plan.py): the examples, and what
`nox -s new` makes of each (tests/envs/test_new_operator.py checks the copies); the Python API checks
its arguments through the shared helpers of custom_op/checks.py; the guide shows the plan."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "scaffold"))
import floor_plan  # noqa: E402
import new  # noqa: E402

OPS = new.operators()


@pytest.mark.skipif(not OPS, reason="no operator in the tree")
@pytest.mark.parametrize("op", OPS)
def test_every_operator_folder_follows_the_floor_plan(op):
    assert floor_plan.problems(ROOT / new.PACKAGE / "ops" / op) == []


def test_a_missing_file_and_a_stray_one_are_named(tmp_path):
    folder = tmp_path / "my_op"
    folder.mkdir()
    for name in floor_plan.FILES:
        (folder / name.replace("OP", "my_op")).touch()
    (folder / "my_op_rows.cuh").touch()  # a helper of the op's own: in the plan
    assert floor_plan.problems(folder) == []
    (folder / "my_op_math.h").unlink()
    (folder / "weights.py").touch()
    assert floor_plan.problems(folder) == [
        f"my_op: missing my_op_math.h ({floor_plan.FILES['OP_math.h']})",
        "my_op: weights.py has no place in the plan (docs/adding-an-operator.md)",
    ]


@pytest.mark.skipif(not OPS, reason="no operator in the tree")
@pytest.mark.parametrize("op", OPS)
def test_the_python_api_checks_through_the_shared_helpers(op):
    """No message is written by hand in an op's Python: each check is a custom_op.checks helper,
    whose message the C++ check of the same name writes too."""
    tree = ast.parse((ROOT / new.PACKAGE / "ops" / op / "__init__.py").read_text())
    raised = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise) and _raises(node, "ValueError")]
    assert raised == [], (
        f"{op}/__init__.py raises ValueError itself at lines {raised}: call custom_op/checks.py's check_* helpers, "
        "or fail_argument for a check of the op's own (C++: the same in csrc/common/checks.h)"
    )
    imported = {
        a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "checks" for a in n.names
    }
    assert any(name.startswith("check_") for name in imported), f"{op}/__init__.py imports no shared check"


def _raises(node: ast.Raise, name: str) -> bool:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == name


def test_the_guide_shows_the_plan_a_line_per_file():
    guide = (ROOT / "docs" / "adding-an-operator.md").read_text()
    for name in floor_plan.FILES:
        assert f"| `{name.replace('OP', 'NAME')}` |" in guide, name


def test_the_guide_lists_every_file_of_csrc_common():
    guide = (ROOT / "docs" / "adding-an-operator.md").read_text()
    common = sorted(path.name for path in (ROOT / new.PACKAGE / "csrc" / "common").iterdir())
    assert [name for name in common if f"`{name}`" not in guide] == []
