"""environment.yml solved by py-rattler for each of its platforms, written as conda-lock's own
lock file (format 1) under the header that records its inputs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import rattler

from .. import paths
from . import quiet_imports
from .channels import channel_url, check_reachable
from .errors import CondaEnvError
from .freshness import header
from .spec import load_spec, match_spec, virtual_packages

with quiet_imports():
    from conda_lock.content_hash import compute_content_hashes
    from conda_lock.lockfile import write_conda_lock_file
    from conda_lock.lockfile.v1.models import HashModel
    from conda_lock.lockfile.v2prelim.models import LockedDependency, Lockfile, LockMeta
    from conda_lock.virtual_package import virtual_package_repo_from_specification


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
        specs = [match_spec(dep) for dep in spec.dependencies[platform]]
        log(f"solving {len(specs)} specs for {platform} from {', '.join(channel_names)}")
        records = asyncio.run(
            rattler.solve(
                sources=sources,
                specs=specs,
                gateway=gateway,
                platforms=[platform, "noarch"],
                virtual_packages=virtual_packages(virtual_packages_yml, platform),
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
