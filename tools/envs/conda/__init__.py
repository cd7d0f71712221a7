"""The conda backend without a conda installation, one concern a module:

  channels.py    can a channel be reached (within seconds, with the way out when not)
  spec.py        environment.yml read as conda-lock reads it, selectors it would misread refused
  solve.py       py-rattler's solve written as conda-lock's lock file
  freshness.py   the lock's header: the sha256 of its inputs, a stale lock detected offline
  install.py     a lock installed with py-rattler, every package's sha256 checked
  activation.py  the activated environment's variables, and the CUDA driver the lock expects

Runs in the tools venv (py-rattler, conda-lock): `python -m tools.envs ...`.
"""

import contextlib
import warnings


@contextlib.contextmanager
def quiet_imports():
    """conda-lock's modules warn, as they are imported, of deprecations in its own vendored code (nothing a
    user of this project can act on): spec.py and solve.py import them inside this."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        yield
