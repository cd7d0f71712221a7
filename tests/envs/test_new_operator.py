"""`nox -s new`'s rules without a build: how a copy renames (synthetic text, then a copy of each
operator of the tree), that a copy adds only its own files, and the refusals, which write nothing.

Standard library and git only: runs in the tools venv (nox -s test). The copy's build and tests
are `nox -s fork`'s.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCAFFOLD = ROOT / "tools" / "scaffold"
sys.path.insert(0, str(SCAFFOLD))
import floor_plan  # noqa: E402
import new  # noqa: E402
from renaming import Renamer  # noqa: E402

PACKAGE = new.PACKAGE
OPS = new.operators()
FRESH = "zz_fresh_op"  # a new operator's name, unlike any of the tree's

# --- the renaming rule ----------------------------------------------------------------------------

RENAMED = [
    # (OP, NAME, text, the text renamed)
    ("cross_entropy", "my_loss", "torch.ops.custom_op.cross_entropy_forward.default(logits, labels, -100)",
     "torch.ops.custom_op.my_loss_forward.default(logits, labels, -100)"),
    ("cross_entropy", "my_loss", 'm.def("cross_entropy_backward(Tensor grad, Tensor logits) -> Tensor");',
     'm.def("my_loss_backward(Tensor grad, Tensor logits) -> Tensor");'),
    ("cross_entropy", "my_loss", "class CrossEntropyLayer(torch.nn.Module):  # like torch.nn.CrossEntropyLoss",
     "class MyLossLayer(torch.nn.Module):  # like torch.nn.CrossEntropyLoss"),
    ("cross_entropy", "my_loss", "return F.cross_entropy(logits, labels)  # custom_op.cross_entropy's baseline",
     "return F.cross_entropy(logits, labels)  # custom_op.my_loss's baseline"),
    ("rms_norm", "my_norm", "namespace custom_op::rms_norm_checks {\nvoid launch_rms_norm();\n}",
     "namespace custom_op::my_norm_checks {\nvoid launch_my_norm();\n}"),
    ("rms_norm", "my_norm", '#define RMS_NORM_THREADS 256\nCUSTOM_OP_CHECK_LAUNCH("rms_norm_forward_kernel");',
     '#define MY_NORM_THREADS 256\nCUSTOM_OP_CHECK_LAUNCH("my_norm_forward_kernel");'),
    ("rms_norm", "my_norm", "_rms_norm_impl(x) and __rms_norm: RMSNorm, rms_normalize, rms_norm2",
     "_my_norm_impl(x) and __my_norm: RMSNorm, rms_normalize, rms_norm2"),
    ("rms_norm", "my_norm", "# as aten's rms_norm is of _fused_rms_norm; PyTorch's `rms_norm`",
     "# as aten's rms_norm is of _fused_rms_norm; PyTorch's `rms_norm`"),
    ("weighted_square", "my_op", "weighted_squares: custom_op.weighted_square_(x, w), weighted_square_out_cpu",
     "weighted_squares: custom_op.my_op_(x, w), my_op_out_cpu"),
    ("weighted_square", "my_op", "tests/examples/weighted_square/test_weighted_square_errors.py::test_x[weighted_square-7]",
     "tests/examples/my_op/test_my_op_errors.py::test_x[my_op-7]"),
    # the package's own names stay whatever the operator's name is
    ("op", "my_thing", 'custom_op.op(x); CUSTOM_OP_QUALIFIED("op"); torch.ops.custom_op.op_forward',
     'custom_op.my_thing(x); CUSTOM_OP_QUALIFIED("my_thing"); torch.ops.custom_op.my_thing_forward'),
]  # fmt: skip


@pytest.mark.parametrize(("old", "name", "text", "renamed"), RENAMED, ids=lambda v: v[:40] if isinstance(v, str) else v)
def test_a_copy_renames_the_ops_own_names(old, name, text, renamed):
    assert Renamer(old, name, protected=(PACKAGE,)).text(text)[0] == renamed


def test_pytorchs_names_are_left_and_reported():
    text = (
        "y = torch.nn.functional.rms_norm(x, x.shape[-1:], w) + torch._fused_rms_norm(x)\n"
        "F.rms_norm(x); torch.ops.aten.rms_norm.default; aten::rms_norm; at::rms_norm\n"
        "_fused_rms_norm; rms_norm(x)\n"
    )
    renamed, kept = Renamer("rms_norm", "my_norm", protected=(PACKAGE,)).text(text)
    assert renamed == text.replace("; rms_norm(x)", "; my_norm(x)")
    assert kept == [
        "torch.nn.functional.rms_norm", "torch._fused_rms_norm", "F.rms_norm", "torch.ops.aten.rms_norm",
        "aten::rms_norm", "at::rms_norm", "_fused_rms_norm",
    ]  # fmt: skip


def test_cross_entropys_pytorch_names_stay():
    text = "F.cross_entropy(z, t, ignore_index=-100); torch.nn.functional.cross_entropy(z, t); nn.CrossEntropyLoss()"
    renamed, kept = Renamer("cross_entropy", "my_loss", protected=(PACKAGE,)).text(text)
    assert renamed == text
    assert kept == ["F.cross_entropy", "torch.nn.functional.cross_entropy", "nn.CrossEntropyLoss"]


def test_file_names_are_renamed():
    renamer = Renamer("rms_norm", "my_norm", protected=(PACKAGE,))
    assert renamer.path(f"{PACKAGE}/ops/rms_norm/rms_norm_cuda.cu") == f"{PACKAGE}/ops/my_norm/my_norm_cuda.cu"
    assert renamer.path("tests/examples/rms_norm/test_rms_norm_x.py") == "tests/examples/my_norm/test_my_norm_x.py"
    assert renamer.path("docs/ops/rms_norm.md") == "docs/ops/my_norm.md"


# --- copies of the tree's operators, in a scratch tree ---------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _tree(root: Path, ops: list[str]) -> Path:
    """A repository of new.py, the package's modules and `ops` with their tests and pages, committed."""
    files = [p.relative_to(ROOT) for p in (*SCAFFOLD.glob("*.py"), *(ROOT / PACKAGE).glob("*.py"))]
    files += [Path(PACKAGE) / "ops" / "__init__.py", *(Path(f) for op in ops for f in new.op_files(op))]
    for path in files:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, root / path)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "tree")
    return root


def _new(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "tools" / "scaffold" / "new.py"), *args],
                          cwd=root, capture_output=True, text=True)  # fmt: skip


def _status(root: Path) -> list[str]:
    return _git(root, "status", "--porcelain", "--untracked-files=all").splitlines()


# An op's name left in a copy, read apart from renaming.py: OP's words bounded by what is not a
# letter or digit (`_` bounds them), in its lower, upper and CamelCase spellings.
def _mentions(old: str) -> re.Pattern:
    camel = "".join(w.capitalize() for w in old.split("_"))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{old}|{old.upper()})(?![A-Za-z0-9])|(?<![A-Za-z0-9]){camel}(?![a-z0-9])")


_PYTORCHS = re.compile(
    r"(?:\b(?:torch|F|functional|nn|aten)\.|\b(?:aten|at)::|(?:PyTorch|torch|aten)'s `?)\w+$|^_\w+$|^liger_kernel\."
)  # PyTorch's names, and Liger-Kernel's module paths (renaming.OTHER_LIBRARIES)


@pytest.mark.skipif(not OPS, reason="no operator in the tree")
@pytest.mark.parametrize("op", OPS)
def test_a_copy_adds_only_its_files_and_keeps_only_pytorchs_names_of_the_op(tmp_path, op):
    root = _tree(tmp_path, [op])
    done = _new(root, FRESH, "--like", op)
    assert done.returncode == 0, done.stderr
    written = sorted(line.split()[1] for line in _status(root))
    assert all(line.startswith("?? ") for line in _status(root)), _status(root)
    assert written == sorted(f.replace(op, FRESH) for f in new.op_files(op))
    assert floor_plan.problems(root / PACKAGE / "ops" / FRESH) == []  # the copy follows the plan too
    listed = re.findall(r"^  (\S+): ", done.stdout, re.MULTILINE)  # where the copy still states OP's math
    assert all((root / path).exists() for path in listed), done.stdout
    # An op without tests of its own or a page (the guide lets a fork delete them) has none listed.
    places = [f"{PACKAGE}/ops/{FRESH}/testing.py", f"tests/examples/{FRESH}/", f"docs/ops/{FRESH}.md"]
    assert [p for p in places if any(w.startswith(p) for w in written)] == [p for p in places if p in listed]
    page = root / "docs" / "ops" / f"{FRESH}.md"  # none of OP's measured figures under the new name
    if page.exists():
        text = page.read_text()
        assert f"nox -s bench -- --op {FRESH}" in text and not re.search(r"^\|.*\d\.\d+x? \|", text, re.MULTILINE)
    left = []
    for path in written:
        text = (root / path).read_text()
        if path.endswith(".py"):
            ast.parse(text)
        for match in _mentions(op).finditer(text):
            start = match.start()
            chain = re.search(r"(?:[\w.:]*|(?:PyTorch|torch|aten)'s `?)\Z", text[max(0, start - 80) : start]).group()
            token = chain + re.match(r"\w+", text[start:]).group()
            if not _PYTORCHS.search(token):
                left.append(f"{path}: {token}")
    assert not left, f"{op}'s name left in its copy: {left}"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return _tree(tmp_path_factory.mktemp("tree"), OPS)


def _refused(done: subprocess.CompletedProcess, root: Path, *fragments: str) -> None:
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.strip().endswith("Nothing was written."), done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, (fragment, done.stderr)
    assert _status(root) == []


@pytest.mark.parametrize(
    ("name", "reason"),
    [("class", "keyword"), ("int", "C++ keyword"), ("9lives", "snake_case"), ("Upper", "snake_case"),
     ("two__underscores", "double"), ("jit", "taken by the package"), ("_private", "snake_case"),
     ("op_forward", "already exists"), ("testing", "taken by the package")],
)  # fmt: skip
def test_a_bad_name_is_refused_and_nothing_written(tree, name, reason):
    _refused(_new(tree, name), tree, name, reason)


@pytest.mark.skipif(not OPS, reason="no operator in the tree")
def test_an_existing_operator_and_a_name_the_copied_code_uses_are_refused(tree):
    for op in OPS:
        _refused(_new(tree, op, "--like", op), tree, "already exists")
        texts = {f: (ROOT / f).read_text() for f in new.op_files(op) if f.endswith(".py")}
        used = sorted(new.top_level_names(texts, Renamer(op, "x_placeholder")))
        valid = [name for name in used if _valid(name)]
        assert valid, f"{op}'s Python uses no name a new operator could take: {used}"
        for name in valid[:3]:
            _refused(_new(tree, name, "--like", op), tree, "shadow")
    if new.DEFAULT in OPS:  # its testing.py imports random; its __init__.py imports check_pair
        for name in ("random", "check_pair"):
            _refused(_new(tree, name), tree, "shadow")


def _valid(name: str) -> bool:
    try:
        new.check_name(name, ROOT / PACKAGE)
    except new.NameError_:
        return False
    return True


def test_kind_is_retired_and_names_like(tree):
    _refused(_new(tree, FRESH, "--kind", "rowwise"), tree, "--kind is retired", "--like", *OPS)
    _refused(_new(tree, FRESH, "--kind=elementwise"), tree, "--kind is retired")


def test_like_of_a_missing_operator_names_the_operators(tree):
    _refused(_new(tree, FRESH, "--like", "no_such_op"), tree, "'no_such_op'", *OPS)


def test_without_like_and_without_weighted_square_the_operators_are_named(tmp_path):
    others = [op for op in OPS if op != new.DEFAULT]
    root = _tree(tmp_path, others)
    _refused(_new(root, FRESH), root, f"without --like, new copies {new.DEFAULT}", *(others or ["no operator"]))


def test_without_any_operator_new_says_so(tmp_path):
    root = _tree(tmp_path, [])
    _refused(_new(root, FRESH), root, "no operator")
    _refused(_new(root, FRESH, "--like", "rms_norm"), root, "no operator")


def test_a_test_file_without_the_ops_name_is_refused(tmp_path):
    root = _tree(tmp_path, [])
    (root / PACKAGE / "ops" / "tiny").mkdir()
    (root / PACKAGE / "ops" / "tiny" / "__init__.py").write_text('"""tiny."""\n\n__all__ = ["tiny"]\n')
    (root / "tests" / "examples" / "tiny").mkdir(parents=True)
    (root / "tests" / "examples" / "tiny" / "test_shapes.py").write_text("def test_tiny():\n    pass\n")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "tiny")
    _refused(_new(root, "small", "--like", "tiny"), root, "test_shapes.py", "test_tiny_")
    (root / "tests" / "examples" / "tiny" / "test_shapes.py").rename(root / "tests/examples/tiny/test_tiny_shapes.py")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "renamed")
    done = _new(root, "small", "--like", "tiny")
    assert done.returncode == 0, done.stderr
    assert (root / "tests/examples/small/test_small_shapes.py").read_text() == "def test_small():\n    pass\n"


def test_other_libraries_module_paths_are_left():
    """A copy of rms_norm keeps Liger-Kernel's module path (its op named like the example)."""
    text = "from liger_kernel.ops.rms_norm import LigerRMSNormFunction  # times rms_norm\n"
    renamed, kept = Renamer("rms_norm", "my_norm", protected=(PACKAGE,)).text(text)
    assert renamed == text.replace("# times rms_norm", "# times my_norm")
    assert kept == ["liger_kernel.ops.rms_norm"]
