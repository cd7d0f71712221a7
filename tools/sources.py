"""The library's sources: the package folder (wherever a rename put it), its C++/CUDA files, and
every file the in-place build reads."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPP_SUFFIXES = (".h", ".cuh", ".cpp", ".cu")
CPP_EXTENSIONS = tuple(f"*{suffix}" for suffix in CPP_SUFFIXES)


def package(root: Path = ROOT) -> Path:
    return next(p.parent for p in root.glob("*/_library.py"))


def cpp_sources(root: Path = ROOT) -> list[str]:
    """What clang-format checks and formats: the library's, and the C++ runner of tools/deploy."""
    folders = [package(root) / folder for folder in ("csrc", "ops")] + [root / "tools" / "deploy"]
    return sorted(str(p) for folder in folders for ext in CPP_EXTENSIONS for p in folder.rglob(ext))


def build_inputs(root: Path = ROOT) -> list[Path]:
    """setup.py, the build settings and every file under csrc/ and ops/, headers included."""
    pkg = package(root)
    sources = [p for folder in ("csrc", "ops") for p in (pkg / folder).rglob("*") if p.is_file()]
    return [root / "setup.py", pkg / "build_config.py", *sources]
