"""The conda backend without a conda installation: lock with py-rattler's solver into
conda-lock's own format, install a lock with py-rattler after checking every package's sha256,
detect a stale lock offline, and compute the activated environment.

Runs in the tools venv (py-rattler, conda-lock): `python -m tools.envs ...`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import rattler
import yaml
from conda_lock.content_hash import backwards_compatible_content_hashes, compute_content_hashes
from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file
from conda_lock.lockfile.v1.models import HashModel
from conda_lock.lockfile.v2prelim.models import LockedDependency, Lockfile, LockMeta
from conda_lock.lookup import DEFAULT_MAPPING_URL
from conda_lock.models.lock_spec import LockSpecification, VersionedDependency
from conda_lock.src_parser import make_lock_spec
from conda_lock.virtual_package import virtual_package_repo_from_specification
from rattler.package.build_string import BuildString
from rattler.shell import ActivationVariables, Shell, activate

from . import paths

# conda-lock logs every line a platform selector filters out; that is expected here.
logging.getLogger("conda_lock.src_parser.selectors").setLevel(logging.ERROR)

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


def load_spec(environment_yml: Path, channels: list[str] | None = None) -> LockSpecification:
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
    write_conda_lock_file(result, lockfile, metadata_choices=set())
    log(f"wrote {lockfile} ({len(packages)} packages over {len(spec.platforms)} platforms)")
    return result


def check_fresh(
    lockfile: Path = paths.CONDA_LOCK,
    environment_yml: Path = paths.ENVIRONMENT_YML,
    virtual_packages_yml: Path = paths.VIRTUAL_PACKAGES_YML,
) -> None:
    """Offline: raises StaleCondaLockError when the lock was made from other inputs."""
    locked = parse_conda_lock_file(lockfile)
    spec = load_spec(environment_yml, [c.url for c in locked.metadata.channels])
    vpr = virtual_package_repo_from_specification(virtual_packages_yml)
    for platform in spec.platforms:
        recorded = locked.metadata.content_hash.get(platform)
        if recorded not in backwards_compatible_content_hashes(spec, vpr, platform):
            raise StaleCondaLockError(
                f"{lockfile.name} is stale for {platform}: {environment_yml.name} or {virtual_packages_yml.name} "
                "changed since it was locked. Run `nox -s lock` to refresh it."
            )


def _fetch(url: str, target: Path, sha256: str) -> Path:
    """Downloads (or copies) a package into the cache and checks its sha256 against the lock."""
    if not (target.exists() and paths.sha256_file(target) == sha256):
        partial = target.with_suffix(target.suffix + ".part")
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme == "file":
            shutil.copyfile(urllib.request.url2pathname(parsed.path), partial)
        else:
            with urllib.request.urlopen(url, timeout=60) as response, partial.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        actual = paths.sha256_file(partial)
        if actual != sha256:
            partial.unlink()
            raise HashMismatchError(
                f"{target.name} from {url} has sha256 {actual}, but the lock says {sha256}: refusing to install it"
            )
        partial.replace(target)
    return target


def install(lockfile: Path, prefix: Path, platform: str | None = None, cache_dir: Path | None = None, log=print) -> int:
    """Creates `prefix` from the lock: every package downloaded, sha256-checked, then linked."""
    platform = platform or current_platform()
    locked = parse_conda_lock_file(lockfile)
    entries = [p for p in locked.package if p.platform == platform]
    if not entries:
        raise CondaEnvError(f"{lockfile.name} locks no packages for {platform} (it locks {locked.metadata.platforms})")
    if any(p.manager != "conda" for p in entries):
        raise CondaEnvError(f"{lockfile.name} has pip entries; this installer installs conda packages only")
    cache = Path(cache_dir or paths.ENVS / "pkgs")
    cache.mkdir(parents=True, exist_ok=True)
    log(f"fetching and checking {len(entries)} packages for {platform}")

    def fetch(entry):
        if not entry.hash.sha256:
            raise HashMismatchError(f"{entry.name} has no sha256 in {lockfile.name}: refusing to install it")
        name = urllib.parse.unquote(entry.url.rsplit("/", 1)[-1])
        return _fetch(entry.url, cache / name, entry.hash.sha256)

    from rich.progress import Progress

    with Progress(transient=True) as progress, ThreadPoolExecutor(max_workers=8) as pool:
        task = progress.add_task("downloading and checking packages", total=len(entries))
        files = []
        for path in pool.map(fetch, entries):
            files.append(path)
            progress.advance(task)

    async def link():
        records = [await rattler.RepoDataRecord.from_package_archive(f) for f in files]
        await rattler.install(records, target_prefix=prefix, cache_dir=cache / "rattler", show_progress=True)

    if prefix.exists():
        shutil.rmtree(prefix)
    asyncio.run(link())
    log(f"installed {len(files)} packages into {prefix}")
    return len(files)


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
