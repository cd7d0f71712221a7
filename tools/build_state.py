"""Whether the in-place library must be built before the tests or the benchmark run (standard
library only).

`nox -s build` records what it built for (the environment and the build settings) in a stamp; a
library that is missing, built for another environment or settings, or older than any build input
is built again. Every input counts: setuptools skips an extension whose listed sources are older
than it, and the headers are not listed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tools import sources

STAMP = sources.ROOT / "build" / "inplace-build.json"
SETTINGS = ("CUSTOM_OP_CUDA", "TORCH_CUDA_ARCH_LIST", "CUSTOM_OP_DEBUG")


def key(prefix: Path) -> dict[str, str]:
    """What a build is for: the environment and the settings that change what is compiled."""
    return {"prefix": str(prefix), **{name: os.environ.get(name, "") for name in SETTINGS}}


def record(prefix: Path, stamp: Path = STAMP) -> None:
    stamp.parent.mkdir(exist_ok=True)
    stamp.write_text(json.dumps(key(prefix)))


def needs_build(prefix: Path, root: Path = sources.ROOT, stamp: Path = STAMP) -> bool:
    libraries = list(sources.package(root).glob("_C*.so"))
    if not libraries or not stamp.exists() or json.loads(stamp.read_text()) != key(prefix):
        return True
    built = min(p.stat().st_mtime for p in libraries)
    return any(p.stat().st_mtime > built for p in sources.build_inputs(root))
