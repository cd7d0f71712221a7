"""Builds custom_op's compiled library (CPU kernels, and CUDA kernels when a toolkit is found).

    pip install --no-build-isolation .        # or -e . for an editable install

The library uses only the LibTorch stable ABI and no Python C API, so it is tagged abi3: one
wheel serves every supported Python and every torch from 2.11 on. Settings (CUSTOM_OP_CUDA,
TORCH_CUDA_ARCH_LIST, MAX_JOBS, CUSTOM_OP_DEBUG) are documented in custom_op/build_config.py.
"""

import importlib.util
import sys
import time
from pathlib import Path

import setuptools

# pyproject.toml's license is a PEP 639 expression, which setuptools reads from 77 on; older ones
# fail with "`project.license` must be valid exactly by one definition" (build isolation installs
# a new one: only --no-build-isolation builds meet an old one).
if int(setuptools.__version__.split(".")[0]) < 77:
    sys.exit(
        f"custom_op: building needs setuptools >= 77, found {setuptools.__version__} in {sys.prefix}. "
        "Fix: pip install 'setuptools>=77', then build again."
    )

import torch  # noqa: E402  (after the setuptools check, which needs no torch)
from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

ROOT = Path(__file__).resolve().parent


def _load_by_path(name):
    # Importing the package would try to load the library being built.
    spec = importlib.util.spec_from_file_location(f"custom_op_{name}", ROOT / "custom_op" / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_config = _load_by_path("build_config")
cxx_runtime = _load_by_path("cxx_runtime")


class TimedBuildExtension(BuildExtension):
    """BuildExtension that reports what it built with and how long it took."""

    def build_extensions(self):
        start = time.perf_counter()
        super().build_extensions()
        for ext in self.extensions:
            library = self.get_ext_fullpath(ext.name)
            try:
                cxx_runtime.check_library(library)
            except cxx_runtime.StaticCxxRuntimeError as error:
                Path(library).unlink()  # never leave a library that crashes on bad input
                raise SystemExit(str(error)) from None
        print(f"custom_op: built in {time.perf_counter() - start:.1f} s")


def extension():
    build_config.check_torch_version(torch.__version__)
    with_cuda = build_config.cuda_enabled()
    jobs = build_config.configure_max_jobs()
    print(f"custom_op: torch {torch.__version__}, MAX_JOBS={jobs}, debug={build_config.debug_build()}")
    kwargs = dict(
        name="custom_op._C",
        sources=[str(Path(s).relative_to(ROOT)) for s in build_config.sources(with_cuda)],
        include_dirs=build_config.include_dirs(),
        py_limited_api=True,
    )
    if not with_cuda:
        print("custom_op: CPU kernels only")
        return CppExtension(extra_compile_args={"cxx": build_config.cxx_flags(False)}, **kwargs)
    archs = build_config.configure_cuda_arch_list()
    print(f"custom_op: CPU and CUDA kernels (torch CUDA {torch.version.cuda}, architectures {archs})")
    return CUDAExtension(
        extra_compile_args={"cxx": build_config.cxx_flags(True), "nvcc": build_config.nvcc_flags()},
        **kwargs,
    )


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": TimedBuildExtension.with_options(use_ninja=True)},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
