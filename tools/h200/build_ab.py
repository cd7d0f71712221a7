"""sm_90 builds of the library for an A/B on a GPU machine, made on this one (no GPU needed): A
from HEAD, then B, C, ... from HEAD with each given patch applied, each in a scratch worktree
under build/ab-src/, the libraries copied to build/ab/A.so, B.so, ... Needs the project
environment (`nox -s env`).

    python3 tools/h200/build_ab.py tools/h200/patches/elementwise-one-vector-per-thread.patch
    # on the GPU machine, carrying build/ab:  bash tools/h200/ab.sh elementwise A B A B
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.envs import choose  # noqa: E402


def build(env: choose.Env, name: str, patch: Path | None) -> Path:
    tree = ROOT / "build" / "ab-src" / name
    if tree.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        shutil.rmtree(tree, ignore_errors=True)
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], cwd=ROOT, check=True)
    try:
        if patch is not None:
            subprocess.run(["git", "apply", str(patch)], cwd=tree, check=True)
        environ = {**os.environ, **env.environ, "TORCH_CUDA_ARCH_LIST": "9.0", "CUSTOM_OP_CUDA": "1"}
        command = [str(env.python), "setup.py", "--quiet", "build_ext", "--inplace"]
        subprocess.run(command, cwd=tree, env=environ, check=True)
        out = ROOT / "build" / "ab" / f"{name}.so"
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / "custom_op" / "_C.abi3.so", out)
        return out
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("patches", type=Path, nargs="+", help="builds B, C, ...: git diffs against HEAD")
    args = parser.parse_args()
    names = "ABCDEFGH"
    if len(args.patches) >= len(names):
        parser.error(f"at most {len(names) - 1} patches, got {len(args.patches)}")
    env = choose.project_env()
    builds = [None, *(p.resolve() for p in args.patches)]
    for name, patch in zip(names, builds, strict=False):
        print(f"build {name} ({patch.name if patch else 'HEAD'}): {build(env, name, patch)}", flush=True)


if __name__ == "__main__":
    main()
