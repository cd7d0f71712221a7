"""nox -s rename -- NEWNAME: the package, its torch.ops and C++ namespace, macros, settings, library,
distribution, environment, image and docs, renamed in one step.

Every text file of the checkout (tracked, or new and not ignored) has the old name replaced in
its three spellings (snake_case, upper case and dashed), PyTorch's decorator
torch.library.custom_op excepted, and the package folder moves; a column after the name (three
spaces or more) stays aligned. Build outputs of the old name are removed (the next build makes the
library under the new namespace). Then nothing may be left of the old name, in any file's text or
path. The nox session reformats what changed (ruff, clang-format) so that lint stays clean.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from names import NameError_, check_identifier  # noqa: E402

# Top-level folders and the tools the project runs: a package of that name would shadow them.
TAKEN = {"bench", "tests", "tools", "docs", "build", "dist", "noxfile", "setup", "torch", "nox", "pytest"}


def current_name(root: Path) -> str:
    packages = [p.parent.name for p in root.glob("*/_library.py")]
    if len(packages) != 1:
        raise NameError_(f"cannot tell which folder is the package (found {packages or 'none'} with _library.py)")
    return packages[0]


def spellings(name: str) -> dict[str, str]:
    return {"snake": name, "upper": name.upper(), "dashed": name.replace("_", "-")}


def pytorch_spans(text: str, name: str) -> list[tuple[int, int]]:
    """Where `text` holds PyTorch's own names that contain the package's name (the template's
    package is named as PyTorch's decorator, torch.library.custom_op): `library.custom_op`
    (torch.library's, or through any module path ending in library, `_library.custom_ops` too), an
    attribute `.custom_op(` called (an alias of torch.library), the name in a `from torch.library
    import ...` list, and where that list imports it as itself, its bare calls `custom_op(...)`. Left
    as they are, and not a leftover."""
    patterns = [rf"(?<=library\.){name}s?\b", rf"(?<=\.){name}(?=\s*\()"]
    for statement in re.finditer(r"from\s+torch\.library\s+import\s+(?:\([^)]*\)|[^\n]*)", text):
        if re.search(rf"\b{name}\b(?!\s+as\b)", statement.group()):
            patterns.append(rf"(?<![\w.]){name}(?=\s*\()")
        patterns += [re.escape(statement.group())]
    spans = sorted({m.span() for pattern in patterns for m in re.finditer(pattern, text)})
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def without_pytorch_names(text: str, name: str) -> str:
    pieces, at = [], 0
    for start, end in pytorch_spans(text, name):
        pieces.append(text[at:start])
        at = end
    return "".join(pieces) + text[at:]


def _replaced_keeping_columns(text: str, old: str, new: str) -> str:
    """`old` replaced by `new`; where the word holding it is followed by a gap of three spaces or more
    (a column of a table or listing), the gap takes up the difference in length."""

    def replace(match: re.Match) -> str:
        tail, gap = match.group("tail"), match.group("gap")
        if gap is None:
            return new
        word = new + tail.replace(old, new)
        return word + " " * max(2, len(gap) + len(old) + len(tail) - len(word))

    pattern = rf"{re.escape(old)}(?:(?P<tail>\S*?)(?P<gap> {{3,}})(?=\S))?"
    return re.sub(pattern, replace, text)


def renamed_text(text: str, old: str, new: str) -> str:
    """Every spelling of `old` replaced by `new`'s, PyTorch's own names kept."""
    before, after = spellings(old), spellings(new)

    def rename_part(part: str) -> str:
        for kind in ("snake", "upper", "dashed"):
            part = _replaced_keeping_columns(part, before[kind], after[kind])
        return part

    pieces, at = [], 0
    for start, end in pytorch_spans(text, old):
        pieces += [rename_part(text[at:start]), text[start:end]]
        at = end
    return "".join(pieces) + rename_part(text[at:])


def files(root: Path) -> list[Path]:
    """The checkout's files: tracked, or new and not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sorted({root / p for p in listed.split("\0") if p and (root / p).is_file()})


def check_new_name(new: str, old: str, root: Path) -> None:
    check_identifier(new, "package name")
    if new == old:
        raise NameError_(f"the package is already called {old!r}")
    if old in new or new in old:
        raise NameError_(f"{new!r} and {old!r} contain one another: the check that {old!r} is gone could not tell")
    if new in TAKEN or (root / new).exists():
        raise NameError_(f"{new!r} is taken by a folder or tool of the project; choose another name")
    if importlib.util.find_spec(new) is not None:
        raise NameError_(f"{new!r} is already an importable module here; choose another name")


def leftovers(root: Path, old: str) -> list[str]:
    found = []
    for path in files(root):
        rel = str(path.relative_to(root))
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            text = ""
        text = without_pytorch_names(text, old)
        for spelling in spellings(old).values():
            if spelling in rel or spelling in text:
                found.append(f"{rel} ({spelling})")
                break
    return found


def rename(new: str, root: Path = ROOT) -> list[Path]:
    old = current_name(root)
    check_new_name(new, old, root)
    for output in [root / "build", root / "dist", *(root / old).glob("_C*.so")]:  # built under the old name
        shutil.rmtree(output) if output.is_dir() else output.unlink(missing_ok=True)
    changed = []
    for path in files(root):
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue  # binary files (the plot) hold no name
        renamed = renamed_text(text, old, new)
        if renamed != text:
            path.write_text(renamed)
            changed.append(path)
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", old], cwd=root, capture_output=True).returncode == 0
    if tracked:  # git keeps the files' history, and `git grep` sees the new folder at once
        subprocess.run(["git", "mv", old, new], cwd=root, check=True)
    else:
        (root / old).rename(root / new)
    left = leftovers(root, old)
    if left:
        raise NameError_(f"{old!r} is still in: {', '.join(left)}")
    return [root / new / p.relative_to(root / old) if p.is_relative_to(root / old) else p for p in changed]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: nox -s rename -- NEWNAME   (e.g. nox -s rename -- myops)", file=sys.stderr)
        return 2
    try:
        old = current_name(ROOT)
        check_new_name(argv[0], old, ROOT)  # before anything is touched
        changed = rename(argv[0])
    except NameError_ as error:
        print(f"nox -s rename: {error}. Nothing was changed.", file=sys.stderr)
        return 1
    print(f"renamed {old} to {argv[0]} in {len(changed)} files; the package is now {argv[0]}/")
    print(f"settings are now {argv[0].upper()}_* (e.g. {argv[0].upper()}_CUDA); {old.upper()}_* are no longer read")
    print(f"next: nox -s build test (import {argv[0]}; torch.ops.{argv[0]}.*)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
