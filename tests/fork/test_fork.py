"""The template as a fork uses it (nox -s fork): in a temporary copy of the checkout, refused names
that write nothing; the fork's own operators kept (every one not among the shipped examples that
tools/scaffold/examples.py declares; in the template itself, the default template alone) and the
others deleted with their tests and pages, `nox -s new --like` the first kept one (and plain `new`
when the default template is kept, else refused), `nox -s rename`, then lint, a build with the
CUDA kernels compiled, and the whole test suite, all green, with every shared suite run on each
kept and new operator."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = next(p.parent.name for p in ROOT.glob("*/_library.py"))
sys.path.insert(0, str(ROOT / "tools" / "scaffold"))
import rename  # noqa: E402
from examples import DEFAULT_TEMPLATE, fork_plan  # noqa: E402

NEW_PACKAGE = "forked_ops" if PACKAGE != "forked_ops" else "forked_ops_b"
NOX = shutil.which("nox")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(NOX is None, reason="needs nox on PATH (nox -s fork)")]


def _git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _nox(cwd, *args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([NOX, *args], cwd=cwd, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def fork(tmp_path_factory):
    """A copy of the checkout's files (tracked, or new and not ignored), committed in a fresh repository."""
    copy = tmp_path_factory.mktemp("fork") / "repo"
    for name in _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "-c", "user.name=fork", "-c", "user.email=fork@example.invalid", "commit", "-q", "-m", "fork")
    return copy


def _env(package: str) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the copy's own sessions set what they need
    env[f"{package.upper()}_ENVS_DIR"] = str(ROOT / ".envs")  # the environments already made, reused
    env[f"{package.upper()}_CUDA"] = "1"
    env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # one architecture: compiled, not every one
    return env


def _ops(root: Path) -> list[str]:
    """The operators in the tree: their folders under <package>/ops."""
    return sorted(p.parent.name for p in (root / PACKAGE / "ops").glob("*/__init__.py"))


EXISTING = pytest.param(None, id="an_existing_operator")  # the tree's first operator, whatever it is
REFUSED = ["class", "int", "9lives", "Upper", "two__underscores", EXISTING, "jit", "torch", "random", "op_forward",
           pytest.param(("op_one", "--kind", "rowwise"), id="kind_retired"),
           pytest.param(("op_one", "--like", "no_such_op"), id="like_missing")]  # fmt: skip


@pytest.mark.parametrize("args", REFUSED)
def test_new_refuses_a_name_and_writes_nothing(fork, args):
    if args is None:
        if not _ops(fork):
            pytest.skip("no operator in the tree yet")
        args = _ops(fork)[0]
    args = (args,) if isinstance(args, str) else args
    done = _nox(fork, "-s", "new", "--", *args, env=_env(PACKAGE))
    assert done.returncode != 0
    assert "Nothing was written" in done.stderr + done.stdout
    assert _git(fork, "status", "--porcelain", "--untracked-files=all") == ""


NEW_OP, SECOND_OP = "op_one", "op_two"
# The shared suites (tests/ops/test_*.py) and a test of each, by which every op must be collected.
SUITES = [
    "test_forward.py::test_matches_reference", "test_autograd.py::test_gradients_match_eager_float64",
    "test_autograd.py::test_gradcheck_float64", "test_compile.py::test_opcheck",
    "test_compile.py::test_fake_kernel_shape_and_strides_match_real",
    "test_compile.py::test_compile_fullgraph_forward_and_backward", "test_errors.py::test_bad_input_raises_a_clear_error",
    "test_properties.py::test_every_op_matches_reference_on_any_view", "test_autocast.py::test_runs_in_the_declared_dtype",
    "test_streams_and_graphs.py::test_runs_on_the_current_stream", "test_streams_and_graphs.py::test_cuda_graph_capture",
    "test_streams_and_graphs.py::test_more_than_2_31_elements",
]  # fmt: skip


def _places(root: Path, ops: list[str]) -> list[str]:
    """The operators' folders, their tests' (tests/examples/<op>) and their pages: what deleting an operator takes."""
    places = [p for op in ops for p in (root / PACKAGE / "ops" / op, root / "tests" / "examples" / op,
                                         root / "docs" / "ops" / f"{op}.md")]  # fmt: skip
    return sorted(str(p.relative_to(root)) for p in places if p.exists())


def _commit(root: Path, message: str) -> None:
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=fork", "-c", "user.email=fork@example.invalid", "commit", "-q", "-m", message)


def test_one_kept_others_deleted_new_like_it_rename_build_and_every_test(fork):
    env = _env(PACKAGE)
    kept, deleted = fork_plan(_ops(fork))  # a fork's own operators, or the default template
    print(f"nox -s fork: kept {', '.join(kept) or 'no operator'}; deleted {', '.join(deleted) or 'none'}")
    if deleted:  # as a fork removes an operator: its folders and page, nothing else to edit
        _git(fork, "rm", "-r", "-q", *_places(fork, deleted))
        _commit(fork, "operators deleted")

    new_ops = []
    if kept:
        done = _nox(fork, "-s", "new", "--", NEW_OP, "--like", kept[0], env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        new_ops.append(NEW_OP)
    done = _nox(fork, "-s", "new", "--", SECOND_OP, env=env)
    if DEFAULT_TEMPLATE in kept:
        assert done.returncode == 0, done.stdout + done.stderr
        new_ops.append(SECOND_OP)
    else:  # no default template to copy: refused, naming the operators there are (or saying there are none)
        assert done.returncode != 0 and "Nothing was written" in done.stderr + done.stdout
        assert (kept[0] if kept else "no operator") in done.stderr + done.stdout
    changed = _git(fork, "status", "--porcelain", "--untracked-files=all")
    places = _places(fork, new_ops)
    for line in changed.splitlines():  # only new files, each in a new operator's folders or page
        assert line.startswith("??") and any(line[3:].startswith(place) for place in places), changed
    for op in new_ops:
        assert (fork / PACKAGE / "ops" / op / "__init__.py").is_file()
    if new_ops:
        _commit(fork, "operators copied")
    changed = ""

    for bad in ("import", "torch", "bench", PACKAGE, "my-ops"):
        done = _nox(fork, "-s", "rename", "--", bad, env=env)
        assert done.returncode != 0 and "Nothing was changed" in done.stderr + done.stdout, bad
        assert _git(fork, "status", "--porcelain", "--untracked-files=all") == changed

    done = _nox(fork, "-s", "rename", "--", NEW_PACKAGE, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (fork / PACKAGE).exists() and all((fork / NEW_PACKAGE / "ops" / op).is_dir() for op in new_ops)
    assert f"{NEW_PACKAGE}/_library.py" in _git(fork, "ls-files")  # moved with git: history kept
    grep = subprocess.run(["git", "grep", "--untracked", "-I", "-l", "-i", "-e", PACKAGE, "-e", PACKAGE.replace("_", "-")],
                          cwd=fork, capture_output=True, text=True)  # fmt: skip
    # PyTorch's decorator torch.library.custom_op is PyTorch's name, not the package's: rename leaves
    # it, where rename's own pytorch_spans says (tests/envs/test_rename.py pins that rule).
    spelled = re.compile(rf"{PACKAGE}|{PACKAGE.replace('_', '-')}", re.IGNORECASE)
    left = []
    for name in grep.stdout.splitlines():
        text = (fork / name).read_text()
        if spelled.search(rename.without_pytorch_names(text, PACKAGE)):
            left.append(name)
    assert left == [], f"{PACKAGE} is left in: {left}"

    env = _env(NEW_PACKAGE)
    # The multi-process and export suites run once, in CI's own `nox -s test`: not again here.
    done = _nox(fork, "-s", "lint", "build", "test", "--", "-m", "not multiprocess and not export", env=env)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    assert "CUDA library with the CUDA" in log  # the CUDA kernels were compiled
    listed = _nox(fork, "-s", "test", "--", "--collect-only", "-q", env=env).stdout
    for op in new_ops + kept:
        for suite in SUITES:
            ids = [line for line in listed.splitlines() if line.startswith(f"tests/ops/{suite}")]
            assert any(re.search(rf"[\[-]{op}[-\]]", line) for line in ids), f"{suite} did not collect {op}"
        if (fork / "tests" / "examples" / op).is_dir():  # the op's own tests
            assert f"tests/examples/{op}/test_{op}" in listed, f"the tests of {op} were not collected"
    for op in deleted:
        assert not re.search(rf"[\[-]{op}[-\]]|examples/{op}/", listed), (
            f"{op} was deleted, yet tests of it were collected"
        )
    sys.stdout.write(log[-2000:])
