"""Each operator's DTensor sharding rules (ops/<name>/sharding.py) reach DTensor when
torch.distributed.tensor is imported, not at `import custom_op`: DTensor's import takes most of a
second, which a single-process program should not pay. Rules register at once if DTensor is already
imported; otherwise a finder on sys.meta_path registers them right after DTensor's own import (before
any DTensor can exist), then leaves sys.meta_path."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

DTENSOR = "torch.distributed.tensor"
_waiting: list[tuple[str, str]] = []  # (the rules' module, the library namespace)


def register_rules(module: str, namespace: str) -> None:
    """`module.register(namespace)` (an operator's sharding.py) once DTensor is imported."""
    if DTENSOR in sys.modules:
        importlib.import_module(module).register(namespace)
        return
    _waiting.append((module, namespace))
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def _register_waiting() -> None:
    while _waiting:
        module, namespace = _waiting.pop(0)
        try:
            importlib.import_module(module).register(namespace)
        except Exception as error:  # DTensor's import must succeed even if a rule cannot register
            warnings.warn(f"{module}: sharding rules not registered for {namespace}: {error}", stacklevel=2)


class _ThenRegister(importlib.abc.Loader):
    """DTensor's own loader, then the waiting rules."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self._loader  # the module keeps its real loader
        self._loader.exec_module(module)
        _register_waiting()


class _AfterDTensorImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != DTENSOR:
            return None
        sys.meta_path.remove(self)  # once, and so that the other finders find DTensor's spec
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenRegister(spec.loader)
        return spec


_FINDER = _AfterDTensorImport()
