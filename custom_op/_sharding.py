"""Each operator's DTensor sharding rules (ops/<name>/sharding.py) reach DTensor when
torch.distributed.tensor is imported, not at `import custom_op`: DTensor's import takes most of a
second, which a single-process program should not pay. Rules register at once if DTensor is already
imported; otherwise a finder on sys.meta_path registers them right after DTensor's own import (before
any DTensor can exist), then leaves sys.meta_path. A rules module imported first (it imports DTensor
itself) registers when its own import ends."""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings

DTENSOR = "torch.distributed.tensor"
_waiting: list[tuple[str, str]] = []  # (the rules' module, the library namespace)
failed: dict[str, str] = {}  # the rules' module: why its rules did not register


def register_rules(module: str, namespace: str) -> None:
    """`module.register(namespace)` (an operator's sharding.py) once DTensor is imported."""
    if DTENSOR in sys.modules:
        importlib.import_module(module).register(namespace)
        return
    _waiting.append((module, namespace))
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def _importing(name: str) -> bool:
    module = sys.modules.get(name)
    return module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False)


def _register_waiting(loaded: str) -> None:
    """The waiting rules, once DTensor is loaded (`loaded`: the module whose import just ended); a
    rules module still being imported waits for the end of its own import."""
    if loaded != DTENSOR and (DTENSOR not in sys.modules or _importing(DTENSOR)):
        return
    for module, namespace in [w for w in _waiting if w[0] == loaded or not _importing(w[0])]:
        _waiting.remove((module, namespace))
        try:
            importlib.import_module(module).register(namespace)
        except Exception as error:  # DTensor's import must succeed even if a rule cannot register
            failed[module] = f"{type(error).__name__}: {error}"
            warnings.warn(f"{module}: sharding rules not registered for {namespace}: {error}", stacklevel=2)
    if not _waiting and _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


class _ThenRegister(importlib.abc.Loader):
    """The module's own loader, then the waiting rules."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self._loader  # the module keeps its real loader
        self._loader.exec_module(module)
        _register_waiting(module.__name__)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Wraps the loaders of DTensor and of the waiting rules' modules in _ThenRegister."""

    def find_spec(self, fullname, path, target=None):
        if fullname != DTENSOR and all(module != fullname for module, _ in _waiting):
            return None
        for finder in sys.meta_path:  # the spec the other finders give
            find = None if finder is self else getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenRegister(spec.loader)
                return spec
        return None


_FINDER = _AfterImport()
