"""A conda lock installed with py-rattler's installer (no conda needed), every package's sha256
checked against the lock before anything is linked."""

from __future__ import annotations

import asyncio
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import rattler

from .. import paths
from .errors import CondaEnvError, HashMismatchError


def current_platform() -> str:
    return str(rattler.Subdir.current())


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
