"""The installed environment as if activated (its activation scripts run), and whether this
machine's CUDA driver is the one the lock expects."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import rattler
import yaml
from rattler.shell import ActivationVariables, Shell, activate

from .. import paths
from .install import current_platform


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
