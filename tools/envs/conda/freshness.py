"""The conda lock's header records the sha256 of the files it was made from, so a stale lock is
found offline: any edit of either file (channels and comments included) makes it stale."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from .. import paths
from .errors import StaleCondaLockError

_INPUT_HASH = "# sha256 of "


def header(environment_yml: Path, virtual_packages_yml: Path) -> str:
    """What wrote the lock and from which inputs."""
    return (
        f"# Written by `nox -s lock` (tools/envs/conda/solve.py): solved by py-rattler {version('py-rattler')}, "
        f"written by conda-lock {version('conda-lock')}'s writer (format version 1). Do not edit.\n"
        "# Install with `conda-lock install`, `micromamba create -f`, or the Nox sessions (py-rattler).\n"
        f"{_INPUT_HASH}{environment_yml.name}: {paths.sha256_file(environment_yml)}\n"
        f"{_INPUT_HASH}{virtual_packages_yml.name}: {paths.sha256_file(virtual_packages_yml)}\n"
    )


def recorded_inputs(lockfile: Path) -> dict[str, str]:
    """The input hashes in a lock's header: {file name: sha256}."""
    found = {}
    for line in lockfile.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(_INPUT_HASH):
            name, _, digest = line.removeprefix(_INPUT_HASH).partition(": ")
            found[name] = digest.strip()
    return found


def check_fresh(
    lockfile: Path | None = None,
    environment_yml: Path | None = None,
    virtual_packages_yml: Path | None = None,
) -> None:
    """Offline: raises StaleCondaLockError when environment.yml or virtual-packages.yml changed in
    any way since the lock was made from them."""
    lockfile = lockfile or paths.CONDA_LOCK
    environment_yml = environment_yml or paths.ENVIRONMENT_YML
    virtual_packages_yml = virtual_packages_yml or paths.VIRTUAL_PACKAGES_YML
    recorded = recorded_inputs(lockfile)
    for source in (environment_yml, virtual_packages_yml):
        if recorded.get(source.name) != paths.sha256_file(source):
            change = "changed" if source.name in recorded else "is not recorded in its header"
            raise StaleCondaLockError(
                f"{lockfile.name} is stale: {source.name} {change} since it was locked. Run `nox -s lock` "
                "to refresh it (`-- --channel URL_OR_PATH` where conda-forge cannot be reached)."
            )
