"""nox -s new -- NAME [--like OP]: a new operator, a renamed copy of one the tree has.

Every operator is a template: `new` copies OP's folder (custom_op/ops/OP/), its tests
(tests/examples/OP/) and its page (docs/ops/OP.md) to NAME's, with OP's own identifiers renamed
(renaming.py: the file names, schemas, C++ and Python names, macros, test ids and docs) and
PyTorch's left. Without --like, OP is the default template (examples.py). No shared file is edited: the registry
finds the folder, the shared suites and the benchmark iterate over the registry. A name that
cannot be used is refused and nothing is written.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from examples import DEFAULT_TEMPLATE  # noqa: E402
from names import NameError_, check_identifier  # noqa: E402
from renaming import Renamer  # noqa: E402

PACKAGE = "custom_op"
DEFAULT = DEFAULT_TEMPLATE  # copied when --like is not given
# The package's own modules and attributes: an operator of that name would shadow them.
RESERVED = {"ops", "jit", "checks", "testing", "build_config", "cxx_runtime", "csrc", "common", "library"}


def operators(root: Path = ROOT) -> list[str]:
    """The operators in the tree: their folders under custom_op/ops/."""
    return sorted(p.parent.name for p in (root / PACKAGE / "ops").glob("*/__init__.py"))


def op_files(op: str, root: Path = ROOT) -> list[str]:
    """OP's files, relative to the root: its folder, its tests and its page (tracked, or new and not ignored)."""
    places = [f"{PACKAGE}/ops/{op}", f"tests/examples/{op}", f"docs/ops/{op}.md"]
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *places],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout.split("\0")  # fmt: skip
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file there but caches
        found = [p for place in places for p in [root / place, *(root / place).rglob("*")]]
        listed = [str(p.relative_to(root)) for p in found if "__pycache__" not in p.parts]
    return sorted({p for p in listed if p and (root / p).is_file()})


def _listing(ops: list[str]) -> str:
    return f"the operators here are {', '.join(ops)}" if ops else f"this tree has no operator ({PACKAGE}/ops/ is empty)"


def source_op(like: str | None, root: Path = ROOT) -> str:
    ops = operators(root)
    if like is None:
        if DEFAULT in ops:
            return DEFAULT
        raise NameError_(
            f"without --like, new copies {DEFAULT}, which this tree does not have: name the operator to copy "
            f"with --like OP ({_listing(ops)})"
        )
    if like not in ops:
        raise NameError_(f"there is no operator {like!r} to copy (--like): {_listing(ops)}")
    return like


def top_level_names(texts: dict[str, str], renamer: Renamer) -> set[str]:
    """Names the copied Python defines or imports at its top level, other than OP's own (renamed):
    an operator of that name would shadow one of them (`torch`, `random`, `call`, ...)."""
    names = set()
    for path, text in texts.items():
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue  # its tests will say so
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {name for name in names if not renamer.mentions(name)}


def existing_names(package: Path) -> set[str]:
    ops = package / "ops"
    names = {p.name for p in ops.iterdir() if p.is_dir()}
    names |= {p.stem for p in package.glob("*.py")}
    return names


def check_name(name: str, package: Path) -> None:
    check_identifier(name, "operator name")
    if name in RESERVED or name == package.name or name.startswith("_"):
        raise NameError_(f"operator name {name!r} is taken by the package itself; choose another name")
    if name.endswith(("_backward", "_forward")) or name in existing_names(package):
        raise NameError_(f"operator {name!r} already exists ({PACKAGE}/ops/{name}/ or a module of that name)")


def check_not_shadowing(name: str, used: set[str]) -> None:
    if name in used:
        raise NameError_(
            f"operator name {name!r} would shadow a name the copied code uses (it imports or defines "
            f"{name!r}); choose another name"
        )


# The sections of an op's page that hold its measured figures: a copy has not been measured.
MEASURED_SECTION = re.compile(r"^## .*(performance|speed|training step)", re.IGNORECASE)


def without_measurements(page: str, name: str) -> str:
    """The copied page with each section of OP's measured figures (its tables, what bounds them) left as a
    note saying how to measure NAME's, so that no figure of OP's stands under NAME's name."""
    out, skipping = [], False
    for line in page.splitlines(keepends=True):
        if line.startswith("## "):
            skipping = bool(MEASURED_SECTION.match(line))
            out.append(line)
            if skipping:
                out.append(
                    f"\nNot measured yet (a copy leaves out its template's figures): `nox -s bench -- --op {name}` "
                    "times the op ([the method](../performance.md)); put its tables here, with what bounds them.\n\n"
                )
        elif not skipping:
            out.append(line)
    return "".join(out)


def read(path: Path) -> str | bytes:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        return path.read_bytes()  # copied as it is


def plan(name: str, like: str | None, root: Path = ROOT) -> tuple[str, dict[str, tuple[str, str | bytes]], list[str]]:
    """(OP, NAME's files: path -> (OP's path it copies, content), PyTorch's names left), before anything is
    written; paths relative to the root."""
    check_name(name, root / PACKAGE)
    old = source_op(like, root)
    renamer = Renamer(old, name, protected=(PACKAGE,))
    sources = {path: read(root / path) for path in op_files(old, root)}
    check_not_shadowing(name, top_level_names({p: t for p, t in sources.items() if isinstance(t, str)}, renamer))
    files, kept = {}, []
    for path, content in sources.items():
        target = renamer.path(path)
        if Path(target).name == Path(path).name and Path(path).name.startswith("test_"):
            raise NameError_(
                f"{path} does not carry {old!r} in its name, so its copy would clash with it (pytest needs "
                f"unique test file names): rename it test_{old}_... first"
            )
        if isinstance(content, str):
            content, left = renamer.text(content)
            kept += left
            if target == f"docs/ops/{name}.md":
                content = without_measurements(content, name)
        files[target] = (path, content)
    clashes = [path for path in files if (root / path).exists()]
    if clashes:
        raise NameError_(f"operator {name!r}: these files exist already: {', '.join(clashes)}")
    return old, files, sorted(set(kept))


def write(files: dict[str, tuple[str, str | bytes]], root: Path = ROOT) -> None:
    for path, (source, content) in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content) if isinstance(content, str) else target.write_bytes(content)
        shutil.copymode(root / source, target)  # an executable script stays one
        print(f"wrote {path}")


def next_steps(name: str, old: str, files: dict) -> str:
    """Where the copy still states OP's math, file by file: what a new user rewrites."""
    folder = f"{PACKAGE}/ops/{name}"
    places = [
        (f"{folder}/{name}_math.h", f"the math, once for both backends, and the kernels ({name}_*.cpp, {name}_*.cu)"),
        (
            f"{folder}/testing.py",
            "reference, baseline, other_libraries, samples, bytes_moved, block, training, placements",
        ),
        (f"{folder}/__init__.py", "the autocast rule, the autograd, the docstrings"),
        (f"{folder}/sharding.py", "the placements the rule serves"),
        (f"tests/examples/{name}/", f"the op's own tests, written for {old}'s math"),
        (f"docs/ops/{name}.md", "its page"),
    ]
    lines = [f"  {path}: {what}" for path, what in places if any(p.startswith(path) for p in files)]
    return "\n".join([
        f"Next, where the copy still states {old}'s math (docs/adding-an-operator.md, 'Make it compute something else'):",
        *lines,
        "then `nox -s build test bench`.",
    ])  # fmt: skip


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="nox -s new --",
        description="Add an operator: a renamed copy of one the tree has (docs/adding-an-operator.md).",
    )
    parser.add_argument("name", help="the new operator's name, snake_case (e.g. scaled_softplus)")
    parser.add_argument("--like", metavar="OP", help=f"the operator to copy (default: {DEFAULT})")
    parser.add_argument("--kind", nargs="?", const="", help=argparse.SUPPRESS)  # retired: refused with a pointer
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    name = args.name
    try:
        if args.kind is not None:
            raise NameError_(
                f"--kind is retired: every operator is a template; copy one of the shape you need with --like OP "
                f"({_listing(operators())})"
            )
        old, files, kept = plan(name, args.like)
    except NameError_ as error:
        print(f"nox -s new: {error}. Nothing was written.", file=sys.stderr)
        return 1
    write(files)
    lines = sum(content.count("\n") for _, content in files.values() if isinstance(content, str))
    print(f"\n{PACKAGE}.{name} is a copy of {old}, renamed: {len(files)} files, {lines} lines (above).")
    if kept:
        print(f"Left as PyTorch's: {', '.join(kept)}.")
    print(next_steps(name, old, files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
