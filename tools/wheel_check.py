"""Checks an installed wheel: the package imports from where it was installed (TARGET, or the
venv's site-packages; not from a checkout) with the expected libraries loaded (the CPU library,
and under a CUDA torch the CUDA library), and each operator of its registry matches its
reference once on the CPU (nox -s wheel).

python tools/wheel_check.py [--libraries _C,_C_cuda] [TARGET]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(target: str | None, libraries: list[str] | None) -> None:
    if target:
        sys.path.insert(0, target)  # before the import: TARGET's package, whatever else is on the path
    import torch

    import custom_op
    from custom_op import ops

    assert custom_op.__file__.startswith(target or sys.prefix), custom_op.__file__
    if custom_op.LIBRARY_PATH is None:
        raise custom_op._LOAD_ERROR
    loaded = [Path(path).name.split(".")[0] for path in custom_op.LIBRARY_PATHS]
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) loaded", ", ".join(custom_op.LIBRARY_PATHS))
    if libraries is not None and loaded != libraries:
        sys.exit(f"expected the libraries {libraries} to be loaded, got {loaded}")
    for spec in ops.specs():
        sample = spec.make_sample((4, 8), torch.float64, "cpu")
        spec.check(spec.function(*sample.args, **sample.kwargs), sample)
        print("ran", spec.name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", nargs="?")
    parser.add_argument("--libraries", type=lambda text: text.split(","), help="the libraries expected, in order")
    args = parser.parse_args()
    main(args.target, args.libraries)
