"""Where the environment files and environments live."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# git-ignored; CUSTOM_OP_ENVS_DIR puts it elsewhere (the Docker image's prebuilt environments)
ENVS_DIR_VARIABLE = "CUSTOM_OP_ENVS_DIR"
ENVS = Path(os.environ.get(ENVS_DIR_VARIABLE) or ROOT / ".envs")

ENVIRONMENT_YML = ROOT / "environment.yml"
VIRTUAL_PACKAGES_YML = ROOT / "virtual-packages.yml"
CONDA_LOCK = ROOT / "conda-lock.yml"

REQUIREMENTS = ROOT / "requirements"
VENV_IN = REQUIREMENTS / "venv.in"
VENV_LOCK = REQUIREMENTS / "venv-lock.txt"
TOOLS_IN = REQUIREMENTS / "tools.in"
TOOLS_LOCK = REQUIREMENTS / "tools-lock.txt"
NOX_IN = REQUIREMENTS / "nox.in"  # nox alone: the Dockerfile and the workflows install it hash-checked
NOX_LOCK = REQUIREMENTS / "nox-lock.txt"

# Marker written last when an environment is complete; it holds the lock's hash.
COMPLETE = ".complete"
# In a conda environment: the variables its activation sets, recorded when it is installed.
ACTIVATION = ".activation.json"


def shown(path: Path) -> str:
    """A path as messages give it: relative to the checkout when inside it (CUSTOM_OP_ENVS_DIR may
    put environments anywhere)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def other_envs_dirs(environ=os.environ) -> list[str]:
    """The *_ENVS_DIR variables set for another package name (the name before `nox -s rename`)."""
    return sorted(k for k in environ if k.endswith("_ENVS_DIR") and k != ENVS_DIR_VARIABLE)


def other_envs_dir_note(environ=os.environ) -> str:
    """What to add where an environment is created while another package's *_ENVS_DIR is set (the
    name before `nox -s rename`, still exported), which this checkout does not read: "" if none is."""
    others = other_envs_dirs(environ)
    if not others:
        return ""
    return f"; {', '.join(others)} is set, but this checkout reads {ENVS_DIR_VARIABLE} (renamed?)"
