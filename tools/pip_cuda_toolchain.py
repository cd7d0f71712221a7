"""Makes the CUDA toolchain from pip wheels (nvidia-cuda-nvcc, -nvvm, -crt, -cccl and torch's
nvidia-cuda-runtime) usable as a CUDA_HOME, so the CUDA kernels compile on machines without a
GPU or a system toolkit. Prints the environment to use:

    eval "$(python tools/pip_cuda_toolchain.py)"     # exports CUDA_HOME and PATH

The wheels must match torch's CUDA version (a newer nvvm emits PTX that an older ptxas rejects).
"""

from __future__ import annotations

import os
import shlex
import sys
import sysconfig
from pathlib import Path


class ToolchainError(RuntimeError):
    pass


def cuda_home(site_packages: Path | None = None) -> Path:
    """The pip toolchain's root (site-packages/nvidia/cu<major>), prepared for linking."""
    site = Path(site_packages or sysconfig.get_paths()["purelib"])
    candidates = sorted((site / "nvidia").glob("cu[0-9]*"))
    homes = [c for c in candidates if (c / "bin" / "nvcc").exists()]
    if not homes:
        raise ToolchainError(
            f"no pip CUDA compiler under {site / 'nvidia'}: pip install nvidia-cuda-nvcc nvidia-nvvm "
            "nvidia-cuda-crt nvidia-cuda-cccl at torch's CUDA version"
        )
    home = homes[-1]
    lib = home / "lib"
    # The runtime wheel ships only libcudart.so.<major>; the linker asks for libcudart.so.
    unversioned = lib / "libcudart.so"
    if not unversioned.exists():
        versioned = sorted(lib.glob("libcudart.so.*"))
        if not versioned:
            raise ToolchainError(f"no libcudart.so.* in {lib}: pip install nvidia-cuda-runtime")
        unversioned.symlink_to(versioned[0].name)
    return home


def environment(site_packages: Path | None = None) -> dict[str, str]:
    home = cuda_home(site_packages)
    return {"CUDA_HOME": str(home), "PATH": f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def main() -> int:
    try:
        env = environment()
    except ToolchainError as error:
        print(f"echo {shlex.quote(str(error))} >&2; false")
        return 1
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
