"""Checks an installed wheel: the package imports from where it was installed (TARGET, or the
venv's site-packages; not from a checkout) with its library loaded, and each operator of its
registry matches its reference once (nox -s wheel).

python tools/wheel_check.py [TARGET]
"""

from __future__ import annotations

import sys


def main(target: str | None) -> None:
    if target:
        sys.path.insert(0, target)  # before the import: TARGET's package, whatever else is on the path
    import torch

    import custom_op
    from custom_op import ops

    assert custom_op.__file__.startswith(target or sys.prefix), custom_op.__file__
    if custom_op.LIBRARY_PATH is None:
        raise custom_op._LOAD_ERROR
    for spec in ops.specs():
        sample = spec.make_sample((4, 8), torch.float64, "cpu")
        spec.check(spec.function(*sample.args, **sample.kwargs), sample)
        print("ran", spec.name)
    print("imported", custom_op.LIBRARY_PATH)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
