"""Builds the C++ runner of AOTInductor packages (tools/deploy/runner.cpp) against the libtorch inside
the installed torch wheel, with the C++ compiler of `CXX` (default c++). No CMake, no Python in the result.

    python -m tools.deploy.build_runner [OUTPUT]      # default build/deploy/runner

The runner is tied to the torch it was built against: rebuild it when torch changes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).with_name("runner.cpp")
DEFAULT_OUTPUT = ROOT / "build" / "deploy" / "runner"


def libraries(torch_lib: Path) -> list[str]:
    """libtorch's libraries the runner links; the CUDA ones where the wheel has them (they register
    the runner of CUDA packages)."""
    names = ["torch", "torch_cpu", "c10"]
    if (torch_lib / "libtorch_cuda.so").exists():
        names += ["torch_cuda", "c10_cuda"]
    return names


def command(cxx: str, output: Path, source: Path = SOURCE) -> list[str]:
    import torch
    from torch.utils import cpp_extension

    torch_lib = Path(cpp_extension.library_paths()[0])
    return [
        *cxx.split(),
        "-std=c++20",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
        *(f"-I{path}" for path in cpp_extension.include_paths()),
        str(source),
        "-o",
        str(output),
        f"-L{torch_lib}",
        f"-Wl,-rpath,{torch_lib}",
        # Kept though the runner calls none of libtorch.so's symbols: a package's model library
        # needs libtorch.so and finds it only as a library the process has loaded.
        "-Wl,--no-as-needed",
        *(f"-l{name}" for name in libraries(torch_lib)),
        "-Wl,--as-needed",
        "-ldl",
    ]


def build(output: Path = DEFAULT_OUTPUT, cxx: str | None = None) -> Path:
    """Compiles the runner to `output`; refuses (StaticCxxRuntimeError) a compiler that links
    libstdc++ statically, whose program would carry a second C++ runtime beside libtorch's."""
    from custom_op import cxx_runtime

    cxx = cxx or cxx_runtime.compiler()
    cxx_runtime.check_toolchain(cxx)
    output.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(command(cxx, output), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"building the runner with {cxx} failed:\n{result.stderr[-4000:]}")
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", nargs="?", type=Path, default=DEFAULT_OUTPUT)
    print(build(parser.parse_args(argv).output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
