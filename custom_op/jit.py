"""The JIT loop: edit the C++/CUDA sources, call load() again, use the new ops; no restart.

    import custom_op.jit
    ops = custom_op.jit.load()          # compiles custom_op/csrc and custom_op/ops with ninja
    y = ops.<name>(x, ...)              # each operator's functions, by name
    # ... edit custom_op/ops/<name>/cuda.cu ...
    ops = custom_op.jit.load()          # rebuilds, loads the new library beside the old one

Each source tree (its content hash) is built once into build/jit/<namespace>/ in the
repository (git ignores build/), as the installed build is (the CPU library, and with CUDA the
CUDA library, here linked to torch's CUDA runtime), and registers its ops under its own namespace
custom_op_jit_<hash>, so a rebuilt library never collides with one already loaded. On an
unchanged tree load() rebuilds nothing. Set CUSTOM_OP_JIT_DIR to build elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.utils.cpp_extension

from . import build_config, cxx_runtime, ops

# Older build folders beyond this many are deleted.
_KEEP_BUILDS = 4

_loaded: dict[str, SimpleNamespace] = {}


def build_root() -> Path:
    if os.environ.get("CUSTOM_OP_JIT_DIR"):
        return Path(os.environ["CUSTOM_OP_JIT_DIR"])
    repo = Path(__file__).resolve().parents[1]
    if (repo / "setup.py").exists():
        return repo / "build" / "jit"
    return Path.home() / ".cache" / "custom_op" / "jit"


def _tree_hash(source_dir: Path, with_cuda: bool, flags: list[str]) -> str:
    digest = hashlib.sha256()
    files = [Path(s) for s in build_config.sources(with_cuda, source_dir)] + build_config.header_files(source_dir)
    for path in sorted(files):
        digest.update(str(path.relative_to(source_dir)).encode())
        digest.update(path.read_bytes())
    for item in [torch.__version__, str(with_cuda), os.environ.get("TORCH_CUDA_ARCH_LIST", ""), *flags]:
        digest.update(item.encode())
    return digest.hexdigest()[:12]


def _prune(root: Path, keep: str) -> None:
    builds = sorted((p for p in root.glob("custom_op_jit_*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for old in builds[:-_KEEP_BUILDS]:
        if old.name != keep and old.name not in _loaded:
            shutil.rmtree(old, ignore_errors=True)


def load(with_cuda: bool | None = None, verbose: bool = False, source_dir: str | Path | None = None) -> SimpleNamespace:
    """Compiles the C++/CUDA sources if they changed, loads them, and returns their ops.

    with_cuda: build the CUDA kernels; None decides as setup.py does (CUSTOM_OP_CUDA, toolkit).
    verbose: show the compiler commands. source_dir: another copy of the package's sources (a folder
    holding csrc/ and ops/; default: the package itself).
    Returns a namespace with every operator's functions by name (each ops/<name>/__init__.py's
    bind()), namespace (the ops' torch.ops namespace), libraries (the paths of the loaded libraries:
    the CPU library, then the CUDA library) and library (the CPU library's).
    """
    build_config.check_torch_version(torch.__version__)
    if with_cuda is None:
        with_cuda = build_config.cuda_enabled()
    if with_cuda:
        build_config.configure_cuda_arch_list()
    build_config.configure_max_jobs()
    cpu_flags = build_config.cxx_flags(False)
    cuda_cxx_flags = build_config.cuda_library_flags(build_config.cxx_flags(True)) if with_cuda else []
    nvcc_flags = build_config.cuda_library_flags(build_config.nvcc_flags()) if with_cuda else []
    source_dir = Path(source_dir).resolve() if source_dir is not None else build_config.PACKAGE
    namespace = f"custom_op_jit_{_tree_hash(source_dir, with_cuda, cpu_flags + cuda_cxx_flags + nvcc_flags)}"
    if namespace in _loaded:
        return _loaded[namespace]
    define = f"-DCUSTOM_OP_NAMESPACE={namespace}"
    cxx_runtime.check_toolchain()  # before building: load() below loads what it builds at once
    build_dir = build_root() / namespace
    # The CPU library first: it defines the schemas that the CUDA library's kernels implement.
    builds = [(namespace, build_config.cpu_library_sources(source_dir), cpu_flags, None)]
    if with_cuda:
        sources = build_config.cuda_library_sources(source_dir)
        builds.append((f"{namespace}_cuda", sources, cuda_cxx_flags, nvcc_flags))
    libraries = []
    for name, sources, cxx_flags, cuda_flags in builds:
        (build_dir / name).mkdir(parents=True, exist_ok=True)
        library = torch.utils.cpp_extension.load(
            name=name,
            sources=sources,
            extra_cflags=[*cxx_flags, define],
            extra_cuda_cflags=[*cuda_flags, define] if cuda_flags is not None else None,
            extra_include_paths=build_config.include_dirs(source_dir),
            build_directory=str(build_dir / name),
            with_cuda=cuda_flags is not None,
            is_python_module=False,
            verbose=verbose,
        )
        try:
            cxx_runtime.check_library(library)
        except cxx_runtime.StaticCxxRuntimeError:
            shutil.rmtree(build_dir, ignore_errors=True)  # the next load() rebuilds with the fixed toolchain
            raise
        libraries.append(library)
    ops.register(namespace)
    api = ops.bind(namespace)
    api.libraries, api.library = libraries, libraries[0]
    _loaded[namespace] = api
    _prune(build_root(), keep=namespace)
    return api
