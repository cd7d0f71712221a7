"""Builds custom_op's compiled library (CPU kernels, and CUDA kernels when a toolkit is found).

    pip install --no-build-isolation .        # or -e . for an editable install

The libraries use only the LibTorch stable ABI and no Python C API, so they are tagged abi3: one
wheel serves every supported Python and every torch from 2.11 on. With CUDA the build makes two, the
CPU library and the CUDA library (the CUDA runtime linked in), so that the CPU kernels load under a
CPU-only torch and the CUDA kernels under torch's CUDA 12 and 13 builds alike. Settings
(CUSTOM_OP_CUDA, TORCH_CUDA_ARCH_LIST, MAX_JOBS, CUSTOM_OP_DEBUG) are documented in
custom_op/build_config.py.
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
from torch.utils import cpp_extension  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402

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
        allow_other_cuda_major()
        super().build_extensions()
        errors = []
        for ext in self.extensions:
            library = self.get_ext_fullpath(ext.name)
            try:
                cxx_runtime.check_library(library)
            except cxx_runtime.StaticCxxRuntimeError as error:
                Path(library).unlink()  # never leave a library that crashes on bad input
                errors.append(str(error))
        if errors:
            raise SystemExit("\n".join(errors))
        print(f"custom_op: built in {time.perf_counter() - start:.1f} s")

    def run(self):
        super().run()
        if self.inplace and len(self.extensions) == 1:
            # An earlier CUDA build's library, which would load beside the new CPU library.
            package = Path(self.get_ext_fullpath(self.extensions[0].name)).parent
            for stale in package.glob(f"{build_config.CUDA_LIBRARY}.*so"):
                stale.unlink()

    def build_extension(self, ext):
        # Each library's objects apart: the CUDA library compiles the same .cpp files with other flags.
        shared_temp, self.build_temp = self.build_temp, str(Path(self.build_temp) / ext.name.rsplit(".", 1)[-1])
        try:
            super().build_extension(ext)
        finally:
            self.build_temp = shared_temp


def allow_other_cuda_major():
    """torch refuses a toolkit of another CUDA major than its own; the CUDA library includes none of
    torch's CUDA headers (only the stable ABI's C functions) and carries its own runtime, so a CUDA 12
    toolkit may build it for a CUDA 13 torch, and the other way round."""
    toolkit = build_config.toolkit_version()
    if toolkit is None or torch.version.cuda is None or str(toolkit[0]) == torch.version.cuda.split(".")[0]:
        return
    print(f"custom_op: CUDA {toolkit[0]}.{toolkit[1]} toolkit for a torch built with CUDA {torch.version.cuda}")
    cpp_extension._check_cuda_version = lambda *args: None


def relative(paths):
    return [str(Path(p).relative_to(ROOT)) for p in paths]


def extensions():
    build_config.check_torch_version(torch.__version__)
    with_cuda = build_config.cuda_enabled()
    jobs = build_config.configure_max_jobs()
    print(f"custom_op: torch {torch.__version__}, MAX_JOBS={jobs}, debug={build_config.debug_build()}")
    common = dict(include_dirs=build_config.include_dirs(), py_limited_api=True)
    cpu = CppExtension(
        name=f"custom_op.{build_config.CPU_LIBRARY}",
        sources=relative(build_config.cpu_library_sources()),
        extra_compile_args={"cxx": build_config.cxx_flags(False)},
        **common,
    )
    if not with_cuda:
        print("custom_op: CPU kernels only")
        return [cpu]
    archs = build_config.configure_cuda_arch_list()
    toolkit = ".".join(map(str, build_config.toolkit_version() or ("?",)))
    print(
        f"custom_op: CPU library, and CUDA library with the CUDA {toolkit} toolkit and its runtime linked in "
        f"(torch CUDA {torch.version.cuda}), architectures {archs}"
    )
    cuda = CUDAExtension(
        name=f"custom_op.{build_config.CUDA_LIBRARY}",
        sources=relative(build_config.cuda_library_sources()),
        extra_compile_args={
            "cxx": build_config.cuda_library_flags(build_config.cxx_flags(True)),
            "nvcc": build_config.cuda_library_flags(build_config.nvcc_flags()),
        },
        **common,
    )
    cuda.libraries = [name for name in cuda.libraries if name != "cudart"] + list(build_config.STATIC_CUDA_RUNTIME)
    return [cpu, cuda]


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": TimedBuildExtension.with_options(use_ninja=True)},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
