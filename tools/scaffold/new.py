"""nox -s new -- NAME [--kind elementwise|rowwise]: a complete operator in its own folder.

elementwise (the default): y = alpha * x, one tensor and one float, its math in one header.
rowwise: RMSNorm over the last dimension, NAME(x, weight, eps), a forward that saves the per-row
rstd and one fused backward for grad_x and grad_weight.

Writes custom_op/ops/NAME/ (schemas, CPU and CUDA kernels, the Python API with its fake kernels,
autograd and autocast, the test-and-benchmark description) and docs/ops/NAME.md. No shared file
is edited: the registry finds the folder, the shared suites and the benchmark iterate over the
registry. A name that cannot be used is refused and nothing is written.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from names import NameError_, check_identifier  # noqa: E402

TEMPLATES = Path(__file__).resolve().parent / "template"
KINDS = ("elementwise", "rowwise")
PACKAGE = "custom_op"
# The package's own modules and attributes: an operator of that name would shadow them.
RESERVED = {"ops", "jit", "checks", "testing", "build_config", "cxx_runtime", "csrc", "common", "library"}


def template_names() -> set[str]:
    """Names the generated Python defines or imports at its top level: an operator of that name
    would shadow one of them (`torch`, `random`, `call`, ...) and break its own module."""
    names = set()
    for template in TEMPLATES.glob("*/*.py.tmpl"):
        tree = ast.parse(template.read_text().replace("{{name}}", "op_name_placeholder"))
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
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
    if name.endswith(("_backward", "_forward")) or name in existing_names(package):
        raise NameError_(f"operator {name!r} already exists (custom_op/ops/{name}/ or a module of that name)")


def target(source: Path, name: str) -> Path:
    """Where a template lands: docs.md in docs/ops/, the rest in the op's folder (NAME -> name)."""
    if source.name == "docs.md.tmpl":
        return Path("docs") / "ops" / f"{name}.md"
    return Path(PACKAGE) / "ops" / name / source.name.removesuffix(".tmpl").replace("NAME", name)


def render(name: str, kind: str = "elementwise") -> dict[Path, str]:
    """Every file of the new operator, by path relative to the repository, before anything is written."""
    sources = sorted((TEMPLATES / kind).glob("*.tmpl"))
    return {target(source, name): source.read_text().replace("{{name}}", name) for source in sources}


NEXT_STEPS = {
    "elementwise": "{package}.{name}(x, alpha) computes alpha * x. Next: edit the math in "
    "{package}/ops/{name}/{name}_math.h, and in {package}/ops/{name}/testing.py the reference (the same math, "
    "for the tests) and the baseline (the PyTorch code your op replaces, for the benchmark)",
    "rowwise": "{package}.{name}(x, weight, eps) computes RMSNorm over the last dimension. Next: edit the "
    "kernels in {package}/ops/{name}/{name}_cpu.cpp and _cuda.cu, and in {package}/ops/{name}/testing.py the "
    "reference (the same math, for the tests) and the baseline (the PyTorch code your op replaces, for the benchmark)",
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="nox -s new --", description="Add an operator in its own folder (docs/adding-an-operator.md)."
    )
    parser.add_argument("name", help="the operator's name, snake_case (e.g. scaled_softplus)")
    parser.add_argument("--kind", choices=KINDS, default="elementwise",
                        help="elementwise: y = alpha * x (default); rowwise: RMSNorm over the last dimension")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    name = args.name
    try:
        check_name(name, ROOT / PACKAGE)
        files = render(name, args.kind)
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
    print("\n" + NEXT_STEPS[args.kind].format(package=PACKAGE, name=name) +
          ", then `nox -s build test bench` (docs/adding-an-operator.md).")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
