"""Checks that a built library uses the process's shared C++ runtime, not a private copy of it.

Some toolchains link libstdc++ statically, wholly or in part: relocated or module-provided GCCs
that ship only libstdc++.a, devtoolset-style compilers, `-static-libstdc++` in inherited flags.
The library then carries a second C++ runtime beside the one torch loaded, with its own locale,
iostreams and exception state; in this project such a build crashed (SIGSEGV) or dropped every
number from its error messages. The build does not try to relink behind the toolchain's back
(the toolchain may ship no libstdc++.so to link, and any other one is a guess): it inspects what
it made and stops with the compiler's name and the fix.

This module imports nothing from the package, so setup.py and tools/doctor.py load it by path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Symbols that only the C++ runtime itself defines (not templates a user's code instantiates):
# a library defining one of them carries its own copy of the runtime.
RUNTIME_SYMBOLS = {
    "__cxa_throw": "__cxa_throw",
    "__cxa_allocate_exception": "__cxa_allocate_exception",
    "__gxx_personality_v0": "__gxx_personality_v0",
    "_ZSt9terminatev": "std::terminate()",
    "_ZNSt6locale7classicEv": "std::locale::classic()",
    "_ZNSt8ios_base4InitC1Ev": "std::ios_base::Init::Init()",
}
SHARED_RUNTIMES = ("libstdc++.so", "libc++.so")

# Dynamic-linking fixes to suggest, most common first.
_CANDIDATE_COMPILERS = ("/usr/bin/g++", "g++", "c++", "clang++")


class StaticCxxRuntimeError(RuntimeError):
    """The library was linked with its own copy of the C++ runtime."""


@dataclass
class Linkage:
    needed: list[str] = field(default_factory=list)  # DT_NEEDED entries
    runtime_defined: list[str] = field(default_factory=list)  # RUNTIME_SYMBOLS the library defines

    @property
    def shared_runtime(self) -> bool:
        return any(n.startswith(SHARED_RUNTIMES) for n in self.needed)

    @property
    def ok(self) -> bool:
        return self.shared_runtime and not self.runtime_defined

    def describe(self) -> str:
        parts = []
        if not self.shared_runtime:
            parts.append("needs no shared libstdc++ (NEEDED: " + (", ".join(self.needed) or "none") + ")")
        if self.runtime_defined:
            parts.append("defines the C++ runtime's own " + ", ".join(self.runtime_defined))
        return " and ".join(parts) or "links libstdc++ dynamically"


def _tool(*names: str) -> str | None:
    return next((found for name in names if (found := shutil.which(name))), None)


def inspect(library: str | os.PathLike) -> Linkage | None:
    """What an ELF library links and which runtime symbols it defines; None where it cannot be read
    (not Linux, or no readelf/nm: binutils, the linker's package, provides both)."""
    readelf, nm = _tool("readelf", "llvm-readelf"), _tool("nm", "llvm-nm")
    if not sys.platform.startswith("linux") or readelf is None or nm is None:
        return None
    dynamic = subprocess.run([readelf, "-d", str(library)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    defined = set()
    for table in ([], ["-D"]):  # the symbol table (gone once stripped) and the dynamic one
        out = subprocess.run([nm, *table, "--defined-only", str(library)], capture_output=True, text=True).stdout
        defined.update(line.split()[-1] for line in out.splitlines() if line.strip())
    return Linkage(needed, [pretty for mangled, pretty in RUNTIME_SYMBOLS.items() if mangled in defined])


def compiler() -> str:
    """The C++ compiler torch.utils.cpp_extension compiles and links with."""
    return os.environ.get("CXX", "c++")


def inductor_compiler() -> str:
    """The C++ compiler torch.compile (Inductor) and AOTInductor compile and link their generated
    code with: the same CXX, else g++ (torch._inductor.config.cpp.cxx)."""
    return os.environ.get("CXX", "g++")


def describe_compiler(cxx: str) -> str:
    path = shutil.which(cxx.split()[0]) or cxx
    try:
        first = subprocess.run([*cxx.split(), "--version"], capture_output=True, text=True).stdout.splitlines()
    except OSError:
        first = []
    return f"{path} ({first[0]})" if first else path


# Throws, so a toolchain that links the C++ runtime at all has to link it here.
_PROBE_SOURCE = '#include <stdexcept>\nextern "C" void probe(int v) { if (v) throw std::runtime_error("p"); }\n'


def probe(cxx: str, extra_flags: tuple[str, ...] = ()) -> Linkage | None:
    """Links a tiny shared library with `cxx` (extra_flags after its object) and inspects it: what the
    toolchain does to any library."""
    with tempfile.TemporaryDirectory() as tmp:
        source, library = Path(tmp) / "probe.cpp", Path(tmp) / "probe.so"
        source.write_text(_PROBE_SOURCE)
        try:
            built = subprocess.run(
                [*cxx.split(), "-shared", "-fPIC", str(source), "-o", str(library), *extra_flags], capture_output=True
            )
        except OSError:
            return None
        return inspect(library) if built.returncode == 0 else None


def dynamic_alternatives(current: str) -> list[str]:
    """Compilers on this machine (other than `current`) whose libraries link libstdc++ dynamically."""
    seen, found = {shutil.which(current.split()[0])}, []
    for candidate in _CANDIDATE_COMPILERS:
        path = shutil.which(candidate)
        if path and path not in seen:
            seen.add(path)
            linkage = probe(path)
            if linkage is not None and linkage.ok:
                found.append(path)
    return found


def fix_message(cxx: str) -> str:
    alternatives = dynamic_alternatives(cxx)
    use = f"CXX={alternatives[0]} (it links libstdc++ dynamically here)" if alternatives else "another CXX"
    return (
        f"build with a compiler that links libstdc++ dynamically, e.g. {use}, or drop -static-libstdc++ "
        "from CXX, CXXFLAGS and LDFLAGS; a relocated GCC that ships only libstdc++.a needs the first"
    )


_refused: dict[str, str] = {}  # compiler -> the reason, once per process


def check_toolchain(cxx: str | None = None) -> None:
    """Raises StaticCxxRuntimeError before a build if `cxx` links libstdc++ statically into a probe.

    For builds that load what they make at once (the JIT loop): loading such a library into a
    process that has torch's libstdc++ can itself crash.
    """
    cxx = cxx or compiler()
    if cxx not in _refused:
        linkage = probe(cxx)
        _refused[cxx] = "" if linkage is None or linkage.ok else _message(cxx, "a test library", linkage)
    if _refused[cxx]:
        raise StaticCxxRuntimeError(_refused[cxx])


def _message(cxx: str, what: str, linkage: Linkage) -> str:
    return (
        f"custom_op: the C++ compiler {describe_compiler(cxx)} linked libstdc++ statically into {what}: "
        f"it {linkage.describe()}. A second copy of the C++ runtime beside torch's crashes or "
        f"garbles the operators' error messages, so the build stops. Fix: {fix_message(cxx)}."
    )


def check_library(library: str | os.PathLike, cxx: str | None = None) -> None:
    """Raises StaticCxxRuntimeError, naming the compiler and the fix, if `library` carries its own
    C++ runtime. Does nothing where the library cannot be inspected."""
    linkage = inspect(library)
    if linkage is None or linkage.ok:
        return
    raise StaticCxxRuntimeError(_message(cxx or compiler(), str(library), linkage))
