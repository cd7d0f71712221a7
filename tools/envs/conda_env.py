"""The conda backend without a conda installation: lock with py-rattler's solver into
conda-lock's own format, install a lock with py-rattler after checking every package's sha256,
detect a stale lock offline, and compute the activated environment.

Runs in the tools venv (py-rattler, conda-lock): `python -m tools.envs ...`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import rattler
import yaml
from conda_lock.content_hash import compute_content_hashes
from conda_lock.lockfile import write_conda_lock_file
from conda_lock.lockfile.v1.models import HashModel
from conda_lock.lockfile.v2prelim.models import LockedDependency, Lockfile, LockMeta
from conda_lock.lookup import DEFAULT_MAPPING_URL
from conda_lock.models.lock_spec import LockSpecification, VersionedDependency
from conda_lock.src_parser import make_lock_spec
from conda_lock.virtual_package import virtual_package_repo_from_specification
from rattler.package.build_string import BuildString
from rattler.shell import ActivationVariables, Shell, activate

from . import paths

# conda-lock logs every line a platform selector filters out, which is what selectors are for;
# the selectors it would misread are refused before it runs (check_selectors).
logging.getLogger("conda_lock.src_parser.selectors").setLevel(logging.ERROR)

# conda-lock's own selector pattern (conda_lock/src_parser/selectors.py) and the names it knows.
_SELECTOR = re.compile(r"(.+?)\s*(#.*)\[([^\[\]]+)\](?(2)[^\(\)]*)$")
SELECTOR_NAMES = {"linux64", "aarch64", "ppc64le", "osx64", "arm64", "osx", "unix", "linux", "win", "win64"}

# Seconds to wait for a channel before saying it cannot be reached.
REACH_TIMEOUT = 5.0


class CondaEnvError(RuntimeError):
    pass


class ChannelUnreachableError(CondaEnvError):
    pass


class HashMismatchError(CondaEnvError):
    pass


class StaleCondaLockError(CondaEnvError):
    pass


def current_platform() -> str:
    return str(rattler.Subdir.current())


def channel_url(channel: str) -> str:
    """A channel name (conda-forge), URL or local folder as the URL rattler fetches from."""
    if "://" in channel:
        return channel.rstrip("/")
    if os.path.isabs(channel) or channel.startswith("."):
        return Path(channel).resolve().as_uri()
    return str(rattler.Channel(channel).base_url).rstrip("/")


def check_reachable(channels: list[str], timeout: float = REACH_TIMEOUT) -> None:
    """Fails within `timeout` seconds per channel, with the reason and the way out."""
    for channel in channels:
        url = channel_url(channel)
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme == "file":
            folder = Path(urllib.request.url2pathname(parsed.path))
            if not (folder / "noarch" / "repodata.json").exists():
                raise ChannelUnreachableError(f"local channel {folder} has no noarch/repodata.json")
            continue
        probe = f"{url}/noarch/repodata.json"
        try:
            request = urllib.request.Request(probe, method="HEAD")
            with urllib.request.urlopen(request, timeout=timeout):
                pass
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            raise ChannelUnreachableError(
                f"conda channel {channel} ({url}) cannot be reached: {error}. Lock where it can be "
                "reached (e.g. the lock workflow), or point at a mirror or local channel: "
                "`nox -s lock -- --channel https://mirror.example/conda-forge` or `--channel /path/to/channel`; "
                "`nox -s lock -- --pypi-only` refreshes the PyPI locks alone"
            ) from error


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


def _virtual_packages(virtual_packages_yml: Path, platform: str) -> list[rattler.GenericVirtualPackage]:
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


def _match_spec(dep) -> str:
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


def _locked(record: rattler.RepoDataRecord, platform: str) -> LockedDependency:
    depends = {}
    for requirement in record.depends:
        name, _, constraint = requirement.partition(" ")
        depends[name] = constraint.strip() or "*"
    if not record.sha256:
        raise CondaEnvError(f"{record.file_name} has no sha256 in its channel's repodata: refusing to lock it")
    return LockedDependency(
        name=record.name.normalized,
        version=str(record.version),
        manager="conda",
        platform=platform,
        dependencies=depends,
        url=record.url,
        hash=HashModel(md5=record.md5.hex() if record.md5 else None, sha256=record.sha256.hex()),
        build=str(record.build),
        categories={"main"},
    )


def lock(
    environment_yml: Path = paths.ENVIRONMENT_YML,
    virtual_packages_yml: Path = paths.VIRTUAL_PACKAGES_YML,
    lockfile: Path = paths.CONDA_LOCK,
    channels: list[str] | None = None,
    cache_dir: Path | None = None,
    log=print,
) -> Lockfile:
    """Solves environment.yml for each of its platforms and writes conda-lock.yml."""
    spec = load_spec(environment_yml, channels)
    channel_names = [c.url for c in spec.channels]
    check_reachable(channel_names)
    sources = [rattler.Channel(channel_url(c)) for c in channel_names]
    gateway = rattler.Gateway(cache_dir=cache_dir or paths.ENVS / "rattler-cache")
    packages = []
    for platform in spec.platforms:
        specs = [_match_spec(dep) for dep in spec.dependencies[platform]]
        log(f"solving {len(specs)} specs for {platform} from {', '.join(channel_names)}")
        records = asyncio.run(
            rattler.solve(
                sources=sources,
                specs=specs,
                gateway=gateway,
                platforms=[platform, "noarch"],
                virtual_packages=_virtual_packages(virtual_packages_yml, platform),
            )
        )
        packages += [_locked(record, platform) for record in records]
    vpr = virtual_package_repo_from_specification(virtual_packages_yml)
    result = Lockfile(
        package=packages,
        metadata=LockMeta(
            content_hash=compute_content_hashes(spec, vpr),
            channels=spec.channels,
            platforms=spec.platforms,
            sources=[os.path.relpath(environment_yml, lockfile.parent)],
        ),
    )
    write_conda_lock_file(result, lockfile, metadata_choices=set(), include_help_text=False)
    lockfile.write_text(header(environment_yml, virtual_packages_yml) + lockfile.read_text())
    log(f"wrote {lockfile} ({len(packages)} packages over {len(spec.platforms)} platforms)")
    return result


_INPUT_HASH = "# sha256 of "


def header(environment_yml: Path, virtual_packages_yml: Path) -> str:
    """What wrote the lock and from which inputs: any edit of either file makes the lock stale."""
    from importlib.metadata import version

    return (
        f"# Written by `nox -s lock` (tools/envs/conda_env.py): solved by py-rattler {version('py-rattler')}, "
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
    any way (channels and comments included) since the lock was made from them."""
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


def _check_local_files(records: list[rattler.RepoDataRecord], lockfile: Path) -> None:
    """rattler checks the sha256 of what it downloads over http(s), not of file:// packages (a
    local channel or mirror): those are checked here, against the lock."""
    for record in records:
        parsed = urllib.parse.urlparse(str(record.url))
        if parsed.scheme != "file":
            continue
        if not record.sha256:
            raise HashMismatchError(f"{record.file_name} has no sha256 in {lockfile.name}: refusing to install it")
        actual = paths.sha256_file(Path(urllib.request.url2pathname(parsed.path)))
        if actual != record.sha256.hex():
            raise HashMismatchError(
                f"{record.file_name} from {record.url} has sha256 {actual}, but the lock says "
                f"{record.sha256.hex()}: refusing to install it"
            )


def install(lockfile: Path, prefix: Path, platform: str | None = None, cache_dir: Path | None = None, log=print) -> int:
    """Creates `prefix` from the lock with rattler's installer (hashes checked, provenance kept)."""
    platform = platform or current_platform()
    environment = rattler.LockFile.from_path(lockfile).default_environment()
    locked = {str(p.name): p for p in environment.platforms()} if environment is not None else {}
    if platform not in locked:
        raise CondaEnvError(f"{lockfile.name} locks no packages for {platform} (it locks {sorted(locked)})")
    if environment.pypi_packages_for_platform(locked[platform]):
        raise CondaEnvError(f"{lockfile.name} has pip entries; this installer installs conda packages only")
    records = environment.conda_repodata_records_for_platform(locked[platform]) or []
    for record in records:  # conda-meta records the channel as conda does: <channel>/<subdir>/<file>
        record.channel = str(record.url).rsplit("/", 2)[0]
    _check_local_files(records, lockfile)
    log(f"installing {len(records)} packages for {platform} with py-rattler")
    if prefix.exists():
        shutil.rmtree(prefix)
    cache = Path(cache_dir or paths.ENVS / "pkgs")
    asyncio.run(rattler.install(records, target_prefix=prefix, cache_dir=cache, show_progress=False))
    log(f"installed {len(records)} packages into {prefix}")
    return len(records)


def host_virtual_packages() -> dict[str, str]:
    """The machine's virtual packages as rattler detects them: {"__cuda": "12.8", ...}."""
    return {str(p.name.normalized): str(p.version) for p in (v.into_generic() for v in rattler.VirtualPackage.detect())}


def cuda_warning(virtual_packages_yml: Path | None = None, platform: str | None = None) -> str | None:
    """One line when the lock expects a CUDA driver this machine lacks or has in an older version."""
    virtual_packages_yml = virtual_packages_yml or paths.VIRTUAL_PACKAGES_YML
    platform = platform or current_platform()
    data = yaml.safe_load(virtual_packages_yml.read_text()) or {}
    wanted = ((data.get("subdirs") or {}).get(platform) or {}).get("packages", {}).get("__cuda")
    if wanted is None:
        return None
    wanted = str(wanted).split()[0]
    found = host_virtual_packages().get("__cuda")
    if found is None:
        return (
            f"warning: the conda lock is for a CUDA {wanted} driver (__cuda {wanted}) and this machine has no "
            "CUDA driver: the environment installs, the CPU kernels run, the CUDA ones cannot"
        )
    if rattler.Version(found) < rattler.Version(wanted):
        return (
            f"warning: this machine's CUDA driver supports CUDA {found} (__cuda {found}), older than the lock's "
            f"__cuda {wanted}: CUDA will fail at run time; update the NVIDIA driver"
        )
    return None


def activated_environ(prefix: Path) -> dict[str, str]:
    """The environment variables of `prefix` activated: PATH, CONDA_PREFIX and whatever the
    packages' activation scripts set (the compilers' CC/CXX, cuda-nvcc's NVCC_PREPEND_FLAGS)."""
    variables = ActivationVariables(None, os.environ.get("PATH", "").split(os.pathsep))
    script = activate(prefix, variables, Shell.bash).script
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", f"{script}\nenv -0"], capture_output=True, check=True
    )
    after = dict(item.split("=", 1) for item in result.stdout.decode().split("\0") if "=" in item)
    changed = {k: v for k, v in after.items() if os.environ.get(k) != v and not k.startswith("BASH")}
    changed.pop("SHLVL", None)
    changed.pop("_", None)
    changed["CONDA_PREFIX"] = str(prefix)
    return changed
