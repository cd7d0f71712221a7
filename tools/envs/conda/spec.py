"""environment.yml and virtual-packages.yml read as conda-lock reads them; the `# [...]` selectors
conda-lock would misread refused first."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import rattler
import yaml
from rattler.package.build_string import BuildString

from . import quiet_imports
from .errors import CondaEnvError

with quiet_imports():
    from conda_lock.lookup import DEFAULT_MAPPING_URL
    from conda_lock.models.lock_spec import LockSpecification, VersionedDependency
    from conda_lock.src_parser import make_lock_spec

# conda-lock logs every line a platform selector filters out, which is what selectors are for;
# the selectors it would misread are refused before it runs (check_selectors).
logging.getLogger("conda_lock.src_parser.selectors").setLevel(logging.ERROR)

# conda-lock's own selector pattern (conda_lock/src_parser/selectors.py) and the names it knows.
_SELECTOR = re.compile(r"(.+?)\s*(#.*)\[([^\[\]]+)\](?(2)[^\(\)]*)$")
SELECTOR_NAMES = {"linux64", "aarch64", "ppc64le", "osx64", "arm64", "osx", "unix", "linux", "win", "win64"}


def check_selectors(environment_yml: Path) -> None:
    """Refuses a `# [...]` selector that conda-lock would misread: it keeps a line on every platform
    when its comment has parentheses after the selector, and drops it on every one for anything
    but a single platform name (`not linux64`, `linux and x86_64`)."""
    for number, line in enumerate(environment_yml.read_text().splitlines(), 1):
        code, hash_, comment = line.partition("#")
        if not hash_ or not code.strip() or not re.search(r"\[[^\[\]]+\]", comment):
            continue
        where = f"{environment_yml.name} line {number} ({line.strip()!r})"
        match = _SELECTOR.match(line)
        if match is None:
            raise CondaEnvError(
                f"{where}: conda-lock ignores this selector (parentheses after it) and would keep the line "
                "on every platform; move the note before the selector or drop its parentheses"
            )
        if match.group(3).strip() not in SELECTOR_NAMES:
            raise CondaEnvError(
                f"{where}: conda-lock understands a single platform name, one of {', '.join(sorted(SELECTOR_NAMES))}; "
                f"[{match.group(3)}] would drop the line on every platform. Write one line per platform instead"
            )


def load_spec(environment_yml: Path, channels: list[str] | None = None) -> LockSpecification:
    check_selectors(environment_yml)
    return make_lock_spec(
        src_files=[environment_yml], channel_overrides=channels or None, mapping_url=DEFAULT_MAPPING_URL
    )


def virtual_packages(virtual_packages_yml: Path, platform: str) -> list[rattler.GenericVirtualPackage]:
    data = yaml.safe_load(virtual_packages_yml.read_text()) or {}
    packages = ((data.get("subdirs") or {}).get(platform) or {}).get("packages") or {}
    result = []
    for name, value in packages.items():
        version, _, build = str(value).partition(" ")  # conda-lock's form: "VERSION [BUILD]"
        result.append(
            rattler.GenericVirtualPackage(
                rattler.PackageName(name), rattler.Version(version), BuildString(build or "0")
            )
        )
    return result


def match_spec(dep) -> str:
    """A dependency of the spec as the match spec rattler solves for."""
    if not isinstance(dep, VersionedDependency) or dep.manager != "conda":
        raise CondaEnvError(f"only conda dependencies can be locked here, got {dep!r}")
    spec = dep.name
    if dep.version:
        spec += f" {dep.version}"
        if dep.build:
            spec += f" {dep.build}"
    elif dep.build:
        spec += f" * {dep.build}"
    return f"{dep.conda_channel}::{spec}" if dep.conda_channel else spec
