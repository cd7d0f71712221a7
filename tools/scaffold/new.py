"""nox -s new -- NAME: a complete elementwise operator (one tensor and one float), in its own folder.

Writes custom_op/ops/NAME/ (schemas, CPU and CUDA kernels, the math they share, the Python API
with its fake kernel and autograd, the test-and-benchmark description) and docs/ops/NAME.md.
No shared file is edited: the registry finds the folder, the shared suites and the benchmark
iterate over the registry. A name that cannot be used is refused and nothing is written.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from names import NameError_, check_identifier  # noqa: E402

TEMPLATE = Path(__file__).resolve().parent / "template"
PACKAGE = "custom_op"
# The package's own modules and attributes: an operator of that name would shadow them.
RESERVED = {"ops", "jit", "checks", "testing", "build_config", "cxx_runtime", "csrc", "common", "library"}


def template_names() -> set[str]:
    """Names the generated Python defines or imports at its top level: an operator of that name
    would shadow one of them (`torch`, `random`, `call`, ...) and break its own module."""
    names = set()
    for template in TEMPLATE.glob("*.py.tmpl"):
        tree = ast.parse(template.read_text().replace("{{name}}", "op_name_placeholder"))
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names - {"op_name_placeholder"}


def existing_names(package: Path) -> set[str]:
    ops = package / "ops"
    names = {p.name for p in ops.iterdir() if p.is_dir()}
    names |= {p.stem for p in package.glob("*.py")}
    return names


def check_name(name: str, package: Path) -> None:
    check_identifier(name, "operator name")
    if name in RESERVED or name == package.name or name.startswith("_"):
        raise NameError_(f"operator name {name!r} is taken by the package itself; choose another name")
    if name in template_names():
        raise NameError_(
            f"operator name {name!r} would shadow a name the generated code uses (it imports or defines "
            f"{name!r}); choose another name"
        )
    if name.endswith("_backward") or name in existing_names(package):
        raise NameError_(f"operator {name!r} already exists (custom_op/ops/{name}/ or a module of that name)")


def render(name: str) -> dict[Path, str]:
    """Every file of the new operator, by path relative to the repository, before anything is written."""
    targets = {
        "__init__.py.tmpl": f"{PACKAGE}/ops/{name}/__init__.py",
        "testing.py.tmpl": f"{PACKAGE}/ops/{name}/testing.py",
        "NAME_schema.cpp.tmpl": f"{PACKAGE}/ops/{name}/{name}_schema.cpp",
        "NAME_math.h.tmpl": f"{PACKAGE}/ops/{name}/{name}_math.h",
        "NAME_cpu.cpp.tmpl": f"{PACKAGE}/ops/{name}/{name}_cpu.cpp",
        "NAME_cuda.cu.tmpl": f"{PACKAGE}/ops/{name}/{name}_cuda.cu",
        "docs.md.tmpl": f"docs/ops/{name}.md",
    }
    return {Path(to): (TEMPLATE / source).read_text().replace("{{name}}", name) for source, to in targets.items()}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: nox -s new -- NAME   (e.g. nox -s new -- scaled_softplus)", file=sys.stderr)
        return 2
    name = argv[0]
    try:
        check_name(name, ROOT / PACKAGE)
        files = render(name)
        clashes = [str(path) for path in files if (ROOT / path).exists()]
        if clashes:
            raise NameError_(f"operator {name!r}: these files exist already: {', '.join(clashes)}")
    except NameError_ as error:
        print(f"nox -s new: {error}. Nothing was written.", file=sys.stderr)
        return 1
    for path, text in files.items():
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / path).write_text(text)
        print(f"wrote {path}")
    print(
        f"\n{PACKAGE}.{name}(x, alpha) computes alpha * x. Next: edit the math in "
        f"{PACKAGE}/ops/{name}/{name}_math.h and the reference in {PACKAGE}/ops/{name}/testing.py, "
        "then `nox -s build test bench` (docs/adding-an-operator.md)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
