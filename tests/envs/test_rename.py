"""nox -s rename's text rule (tools/scaffold/rename.py) on a small git checkout: every spelling of the
package's name replaced, PyTorch's torch.library.custom_op left as it is and not reported as left over."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "scaffold"))
import rename  # noqa: E402

SOURCE = """import torch
import custom_op
from torch.library import custom_op as define

@torch.library.custom_op("custom_op::my_add", mutates_args=())
def my_add(x: torch.Tensor) -> torch.Tensor:
    return custom_op.weighted_square(x, x)  # CUSTOM_OP_CUDA=1, pip install custom-op
"""


def test_rename_keeps_pytorchs_custom_op(tmp_path):
    (tmp_path / "custom_op").mkdir()
    (tmp_path / "custom_op" / "_library.py").write_text("NAMESPACE = 'custom_op'\n")
    (tmp_path / "ops.py").write_text(SOURCE)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    rename.rename("renamedpkg", root=tmp_path)
    text = (tmp_path / "ops.py").read_text()
    assert text == (
        SOURCE.replace("import custom_op\n", "import renamedpkg\n")
        .replace('"custom_op::', '"renamedpkg::')
        .replace("custom_op.weighted", "renamedpkg.weighted")
        .replace("CUSTOM_OP_CUDA", "RENAMEDPKG_CUDA")
        .replace("custom-op", "renamedpkg")
    )
    assert "@torch.library.custom_op(" in text and "from torch.library import custom_op as define" in text
    assert (tmp_path / "renamedpkg" / "_library.py").read_text() == "NAMESPACE = 'renamedpkg'\n"
    assert rename.leftovers(tmp_path, "custom_op") == []
    (tmp_path / "left.py").write_text("custom_op.thing\n")
    assert rename.leftovers(tmp_path, "custom_op") == ["left.py (custom_op)"]


KEPT_FORMS = [
    "from torch.library import custom_op\n@custom_op('custom_op::f', mutates_args=())  # custom_op's\n",
    "from torch.library import register_fake, custom_op\n@custom_op('custom_op::f', mutates_args=())\n",
    "from torch.library import (\n    custom_op,\n    register_fake,\n)\n@custom_op('custom_op::f', mutates_args=())\n",
    "from torch import library\n@library.custom_op('custom_op::f', mutates_args=())\n",
    "import torch.library as L\n@L.custom_op('custom_op::f', mutates_args=())\n",
    "from torch._library.custom_ops import CustomOpDef  # custom_op's type\n",
]


@pytest.mark.parametrize("source", KEPT_FORMS)
def test_every_spelling_of_pytorchs_decorator_is_kept(source):
    renamed = rename.renamed_text(source, "custom_op", "renamedpkg")
    assert renamed == source.replace("'custom_op::", "'renamedpkg::").replace("# custom_op", "# renamedpkg")
    assert rename.without_pytorch_names(renamed, "custom_op").count("custom_op") == 0


LISTING = "    custom_op/                 the package\n      ops/<name>/              one folder per operator\n"


@pytest.mark.parametrize("new", ["myops", "a_much_longer_package_name"])
def test_a_column_after_the_name_stays_aligned(new):
    renamed = rename.renamed_text(LISTING + "x = custom_op.f  # two spaces: no column\n", "custom_op", new)
    listing, comment = renamed.splitlines()[:2], renamed.splitlines()[2]
    if len(new) < len("custom_op"):
        assert listing[0].index("the package") == listing[1].index("one folder")
    assert listing[0].startswith(f"    {new}/  ")  # two spaces at least where the name outgrows the column
    assert comment == f"x = {new}.f  # two spaces: no column"


def test_an_environment_created_under_another_names_envs_dir_says_so():
    from tools.envs import paths

    old = "OLD_NAME_ENVS_DIR"  # the name before a rename, still exported
    assert paths.other_envs_dir_note({paths.ENVS_DIR_VARIABLE: "/envs"}) == ""
    note = paths.other_envs_dir_note({old: "/envs", "PATH": "/bin"})
    assert old in note and paths.ENVS_DIR_VARIABLE in note
