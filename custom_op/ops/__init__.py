"""The registry: every operator is a package here (ops/<name>/), found by its folder, not listed.

An operator package holds its schemas (<name>_schema.cpp), kernels (<name>_cpu.cpp,
<name>_cuda.cu, ...: file names are unique across the library), its Python
API with fake kernels and autograd (__init__.py: `__all__`, `register(namespace)`,
`bind(namespace)`) and its test-and-benchmark description (testing.py: `SPEC`). The shared test
suites and the benchmark iterate over it. `nox -s new -- NAME --like OP` copies one.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType, SimpleNamespace

OPERATORS: dict[str, ModuleType] = {
    info.name: importlib.import_module(f"{__name__}.{info.name}")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    if info.ispkg and not info.name.startswith("_")
}

_registered: set[str] = set()


def public_functions() -> dict:
    """Every operator's public functions, by name (what `import custom_op` exports)."""
    return {name: getattr(module, name) for module in OPERATORS.values() for name in module.__all__}


def register(namespace: str) -> None:
    """Fake kernels, autograd and autocast for every operator of a loaded library (once per namespace)."""
    if namespace not in _registered:
        for module in OPERATORS.values():
            module.register(namespace)
        _registered.add(namespace)


def bind(namespace: str) -> SimpleNamespace:
    """The ops of `namespace` as plain callables by name: ops.<name>(x, ...), ..."""
    ops = {}
    for module in OPERATORS.values():
        ops.update(module.bind(namespace))
    return SimpleNamespace(namespace=namespace, **ops)


def specs() -> list:
    """Every operator's test-and-benchmark description (ops/<name>/testing.py: SPEC)."""
    return [importlib.import_module(f"{module.__name__}.testing").SPEC for module in OPERATORS.values()]
