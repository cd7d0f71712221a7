"""Commands the noxfile runs in the tools venv (py-rattler, conda-lock):

python -m tools.envs lock-conda [--channel URL_OR_PATH ...]
python -m tools.envs check-conda            # JSON: can conda-lock.yml be used here, and why not
python -m tools.envs install-conda PREFIX   # install conda-lock.yml, record the activated environment
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import paths
from .conda import activation, channels, errors, freshness, install, solve, spec


def conda_status() -> dict:
    """Can conda-lock.yml be used here (offline once its environment is installed), and why not."""
    try:
        freshness.check_fresh()
    except errors.StaleCondaLockError as error:
        return {"usable": False, "stale": True, "reason": str(error)}
    from conda_lock.lockfile import parse_conda_lock_file

    locked = parse_conda_lock_file(paths.CONDA_LOCK)
    platform = install.current_platform()
    if platform not in locked.metadata.platforms:
        return {"usable": False, "stale": False, "reason": f"conda-lock.yml has no {platform} packages"}
    installed = paths.ENVS / f"conda-{paths.sha256_file(paths.CONDA_LOCK)[:12]}" / paths.COMPLETE
    warning = activation.cuda_warning()
    if installed.exists():  # made from this very lock: no channel needed, offline included
        return {"usable": True, "stale": False, "reason": "conda-lock.yml is fresh and installed", "warning": warning}
    try:
        channels.check_reachable([c.url for c in locked.metadata.channels])
    except errors.ChannelUnreachableError as error:
        return {"usable": False, "stale": False, "reason": str(error).split(". Lock where")[0]}
    reason = "conda-lock.yml is fresh and its packages can be had"
    return {"usable": True, "stale": False, "reason": reason, "warning": warning}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.envs")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("check-channels", "lock-conda"):
        sub = commands.add_parser(name)
        sub.add_argument("--channel", action="append", default=[], help="channel override: mirror URL or local folder")
    commands.add_parser("check-conda")
    install_conda = commands.add_parser("install-conda")
    install_conda.add_argument("prefix", type=Path)
    args = parser.parse_args(argv)

    try:
        if args.command == "check-channels":
            lock_spec = spec.load_spec(paths.ENVIRONMENT_YML, args.channel or None)
            channels.check_reachable([c.url for c in lock_spec.channels])
            print("conda channels reachable: " + ", ".join(c.url for c in lock_spec.channels))
        elif args.command == "lock-conda":
            solve.lock(channels=args.channel or None)
        elif args.command == "check-conda":
            print(json.dumps(conda_status()))
        else:
            warning = activation.cuda_warning()
            if warning:
                print(warning, file=sys.stderr)
            install.install(paths.CONDA_LOCK, args.prefix)
            environ = activation.activated_environ(args.prefix)
            if (args.prefix / "bin" / "nvcc").exists():
                # conda's CUDA headers and libraries live under targets/<arch>-linux.
                environ["CUDA_HOME"] = str(args.prefix)
            (args.prefix / paths.ACTIVATION).write_text(json.dumps(environ, indent=1))
    except errors.CondaEnvError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
