"""The project's environments, as the Nox sessions use them.

Two backends give the same thing, one environment shared by every session and rebuilt only when
its lock changes:
  - conda: made from conda-lock.yml with py-rattler (no conda, mamba or micromamba needed),
    every package's sha256 checked against the lock (conda/, one concern a module);
  - venv: made from the hash-locked requirements/venv-lock.txt, with a pip CUDA toolchain
    matched to torch's CUDA (venvs.py).
A small "tools" venv (requirements/tools-lock.txt) holds what builds the conda environment and
the locks: py-rattler, conda-lock, pip-tools, and the linters.

Modules that the noxfile imports use the standard library only; conda/ runs inside the tools
venv (`python -m tools.envs ...`).
"""
