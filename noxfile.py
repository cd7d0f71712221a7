"""Build, test and benchmark the operators in one pinned environment, the same way everywhere.

    nox -s build test bench      # the shared environment is created once per lock
    nox -l                       # every session

Environment: conda (from conda-lock.yml, installed without conda) when that lock exists and its
packages can be had, else a venv from requirements/venv-lock.txt; CUSTOM_OP_ENV=conda|venv
chooses. The sessions call tools/: envs/ for the environments and locks, and one module a job.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nox
import nox.command

sys.path.insert(0, str(Path(__file__).parent))  # nox does not put the noxfile's folder on sys.path

from tools import build_state, compute_sanitizer, pytest_args, sources
from tools.envs import choose, installer, locks, paths
from tools.envs.installer import InstallerError
from tools.envs.venvs import StaleLockError
from tools.scaffold.examples import fork_plan

nox.options.sessions = ["lint", "build", "test"]
nox.options.default_venv_backend = "none"

ROOT = Path(__file__).parent
_envs: dict[str, choose.Env] = {}  # one per nox process: `nox -s build test bench` sets up once


def _environment(session: nox.Session, which: str, make) -> choose.Env:
    if which not in _envs:
        try:
            _envs[which] = make(log=session.log)
        except (choose.EnvSetupError, StaleLockError, InstallerError) as error:
            session.error(str(error))  # a stale lock or a bad setting: the message says what to run
    return _envs[which]


def project_env(session: nox.Session) -> choose.Env:
    return _environment(session, "project", choose.project_env)


def tools_env(session: nox.Session) -> choose.Env:
    return _environment(session, "tools", choose.tools_env)


def run(session: nox.Session, env: choose.Env, *args: str, **kwargs) -> None:
    session.run(*args, env=env.environ, external=True, **kwargs)


@nox.session(python=False, name="env")
def prepare_env(session: nox.Session) -> None:
    """Create (or reuse) the shared environment and the tools venv from their locks."""
    project_env(session)
    tools_env(session)


@nox.session(python=False)
def build(session: nox.Session) -> None:
    """Compile the library in place (CPU, and CUDA when a toolkit is found; CUSTOM_OP_CUDA=1 requires it)."""
    env = project_env(session)
    run(session, env, env.python, "tools/doctor.py", "--summary")
    start = time.perf_counter()
    # A line per compiled file (build/build.log keeps the compilers' command lines; `-- --verbose` shows them).
    verbose = ["--verbose"] if "--verbose" in session.posargs and session.name == "build" else []
    build_command = [env.python, "setup.py", "--quiet", "build_ext", "--inplace"]
    run(session, env, env.python, "tools/build_log.py", *verbose, "--", *build_command)
    build_state.record(env.prefix)
    session.log(f"build took {time.perf_counter() - start:.1f} s")


def _build_if_needed(session: nox.Session, env: choose.Env) -> None:
    if not build_state.needs_build(env.prefix):
        return
    if not os.access(ROOT, os.W_OK):
        session.error(
            f"{ROOT} is read-only and its library must be (re)built first: run `nox -s build` where it is writable"
        )
    build(session)


def _operator_tests() -> list[str]:
    """The shared suites (tests/ops), the operators' own tests (tests/examples), the build's and its
    tools' tests (tests/build), and the operators deployed without Python (tests/deploy), in the
    project's environment."""
    return [f for f in ("tests/ops", "tests/examples", "tests/build", "tests/deploy") if (ROOT / f).is_dir()]


def _parallel(env: choose.Env, posargs: list[str]) -> list[str]:
    """pytest-xdist's workers, one per core (tests/conftest.py sizes them), where the environment has it
    and the arguments leave it on: the multiprocess and export suites each stay on one worker (loadgroup)."""
    if any(arg in posargs for arg in ("-n", "--numprocesses", "--pdb", "--trace", "--collect-only", "--co")):
        return []
    if any(arg.startswith(("-n", "--numprocesses=")) or arg == "no:xdist" for arg in posargs):
        return []
    has_xdist = subprocess.run([env.python, "-c", "import xdist"], env=env.environ, capture_output=True)
    return ["-n", "auto", "--dist", "loadgroup"] if has_xdist.returncode == 0 else []


@nox.session(python=False)
def test(session: nox.Session) -> None:
    """Run the operator tests (building first if needed) and the environment tests."""
    project_args, envs_args = pytest_args.split_by_venv(session.posargs)
    if project_args is not None:
        env = project_env(session)
        _build_if_needed(session, env)
        # A read-only checkout (the image's, run by another uid) has no room for pytest's cache.
        cache = [] if os.access(ROOT, os.W_OK) else ["-p", "no:cacheprovider"]
        suites = [] if pytest_args.name_tests(session.posargs) else _operator_tests()
        run(session, env, env.python, "-m", "pytest", *suites, *cache, *_parallel(env, session.posargs), *project_args)
    if envs_args is None:
        session.log("tests/envs left out: the arguments name tests outside it (`nox -s test` alone runs every suite)")
        return
    tools = tools_env(session)
    # The uv that made the environments (beside Nox's Python) for the test of a real uv install: the
    # tools venv has none of its own.
    uv = {installer.TEST_UV_VARIABLE: found} if (found := installer.find_uv()) else {}
    # -k may match nothing in tests/envs (pytest's 5), which is no failure where it was not named.
    narrowed = [0, 5] if not pytest_args.name_tests(session.posargs) else [0]
    session.run(tools.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *envs_args, env={**tools.environ, **uv},
                external=True, success_codes=narrowed)  # fmt: skip


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    """Benchmark the operators against eager PyTorch and torch.compile (`-- --quick` for CI)."""
    env = project_env(session)
    _build_if_needed(session, env)
    run(session, env, env.python, "-m", "bench", *session.posargs)


@nox.session(python=False)
def new(session: nox.Session) -> None:
    """Add an operator: `nox -s new -- NAME [--like OP]` copies OP (weighted_square by default) as NAME."""
    tools = tools_env(session)
    output = session.run(sys.executable, str(ROOT / "tools" / "scaffold" / "new.py"), *session.posargs,
                         external=True, silent=True)  # fmt: skip
    print(output, end="")
    written = [line.removeprefix("wrote ") for line in output.splitlines() if line.startswith("wrote ")]
    _reformat(session, tools, written)  # the name's length rewraps the copied code; the rest is left as it is


@nox.session(python=False)
def rename(session: nox.Session) -> None:
    """Rename the package, its namespace, macros, settings, distribution and image: `nox -s rename -- NEWNAME`."""
    tools = tools_env(session)  # before the rename: its venv does not depend on the name
    session.run(sys.executable, str(ROOT / "tools" / "scaffold" / "rename.py"), *session.posargs, external=True)
    _reformat(session, tools)  # names of another length rewrap lines


@nox.session(python=False, name="format")
def format_(session: nox.Session) -> None:
    """Make the code as `nox -s lint` wants it: import order, ruff format, clang-format."""
    _reformat(session, tools_env(session))


def _reformat(session: nox.Session, tools: choose.Env, files: list[str] | None = None) -> None:
    """What `nox -s lint` checks, made so: import order, ruff format, clang-format; on `files` alone if given."""
    python = ["."] if files is None else [f for f in files if f.endswith(".py")]
    cpp = sources.cpp_sources() if files is None else [f for f in files if f.endswith(sources.CPP_SUFFIXES)]
    if python:
        run(session, tools, tools.bin("ruff"), "check", "--fix", "--select", "I", "--quiet", *python)
        run(session, tools, tools.bin("ruff"), "format", "--quiet", *python)
    if cpp:
        _clang_format(session, tools, ["-i"], cpp)


def _clang_format(session: nox.Session, tools: choose.Env, flags: list[str], files: list[str]) -> None:
    """clang-format on `files`, named in a list file: on the command line they filled the screen."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="clang-format-files-") as listed:
        listed.write("\n".join(files))
        listed.flush()
        run(session, tools, tools.bin("clang-format"), *flags, f"--files={listed.name}")


@nox.session(python=False)
def fork(session: nox.Session) -> None:
    """The template as a fork uses it: in a temporary copy, the fork's own operators kept (tools/scaffold/examples.py)
    and the others deleted, `new --like` one, `rename`, lint, build (CUDA), every test."""
    project_env(session)  # the copy reuses the environments made here
    tools = tools_env(session)
    kept, deleted = fork_plan(sorted(p.parent.name for p in (ROOT / "custom_op" / "ops").glob("*/__init__.py")))
    session.log(f"fork: keeps {', '.join(kept) or 'no operator'} and tests it; deletes {', '.join(deleted) or 'none'}")
    environ = dict(tools.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), tools.environ["PATH"]]))
    session.run(tools.python, "-m", "pytest", "tests/fork", "-p", "no:cacheprovider", *session.posargs,
                env=environ, external=True)  # fmt: skip


@nox.session(python=False)
def image(session: nox.Session) -> None:
    """Build the Dockerfile and run it: the CPU tests, then the GPU job's layout (docker, else buildah)."""
    session.run(sys.executable, str(ROOT / "tools" / "image.py"), *session.posargs, external=True)


# The supported range's ends: the oldest torch with the stable ABI this library targets, the newest on PyPI.
ABI_TORCH = ("2.11.0", "2.15.0")


@nox.session(python=False)
@nox.parametrize("cxx", ["g++", "clang++"])
@nox.parametrize("torch", ABI_TORCH)
def abi(session: nox.Session, torch: str, cxx: str) -> None:
    """The CPU library built against one torch with one compiler, its tests run under every torch of the range
    (`nox -s abi` runs each pair; venvs in .envs/abi/)."""
    runtimes = [arg for version in ABI_TORCH for arg in ("--runtime", version)]
    session.run(sys.executable, str(ROOT / "tools" / "abi" / "torch_range.py"), "--torch", torch, "--cxx", cxx,
                *runtimes, external=True)  # fmt: skip


@nox.session(python=False)
def sanitize(session: nox.Session) -> None:
    """The CUDA tests under compute-sanitizer (memcheck, racecheck, initcheck, synccheck); needs a GPU."""
    env = project_env(session)
    _build_if_needed(session, env)
    sanitizer = compute_sanitizer.find(env.environ)
    if sanitizer is None:
        session.error(compute_sanitizer.NOT_FOUND)
    for command in compute_sanitizer.commands(sanitizer, env.python, _operator_tests(), session.posargs):
        run(session, env, *command)


@nox.session(python=False)
def lock(session: nox.Session) -> None:
    """Refresh the locks: conda-lock.yml (conda-forge) and requirements/*-lock.txt (PyPI, hashed).

    `-- --channel URL_OR_PATH` locks against a mirror or a local channel; `-- --pypi-only` skips conda.
    """
    locking = _environment(session, "lock", choose.locking_env)  # whatever state the tools lock is in
    channels = [f"--channel={arg}" for flag, arg in itertools.pairwise(session.posargs) if flag == "--channel"]
    check_channels = ("-m", "tools.envs", "check-channels", *channels)
    pypi_only = "--pypi-only" in session.posargs
    if not pypi_only and locking.backend == "tools":
        # Within seconds where no channel can be reached, before the PyPI locks take minutes.
        run(session, locking, locking.python, *check_channels)
    _compile_lock(session, locking, paths.TOOLS_IN, paths.TOOLS_LOCK)
    tools = tools_env(session)  # from the lock just written
    if not pypi_only and locking.backend != "tools":
        run(session, tools, tools.python, *check_channels)
    _compile_lock(session, tools, paths.VENV_IN, paths.VENV_LOCK)
    _compile_lock(session, tools, paths.NOX_IN, paths.NOX_LOCK)
    for version in ABI_TORCH:  # the range's ends, whatever torch a machine-wide pip cap allows
        source = paths.REQUIREMENTS / f"abi-torch-{version}.in"
        _compile_lock(
            session, tools, source, source.with_name(f"abi-torch-{version}-lock.txt"), PIP_CONSTRAINT="/dev/null"
        )
    if not pypi_only:
        run(session, tools, tools.python, "-m", "tools.envs", "lock-conda", *channels)


def _compile_lock(session: nox.Session, tools: choose.Env, source: Path, target: Path, **environ: str) -> None:
    def compile_with(tool: str, *args: str) -> None:
        session.run(tools.bin(tool), *args, env={**tools.environ, **environ}, external=True)

    locks.compile_lock(source, target, run=compile_with)
    session.log(f"wrote {target.relative_to(ROOT)}")


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    """ruff (lint and format) for Python, clang-format for C++/CUDA, hadolint, actionlint, zizmor (both personas)."""
    tools = tools_env(session)
    run(session, tools, tools.bin("ruff"), "check", ".")
    try:
        run(session, tools, tools.bin("ruff"), "format", "--check", ".")
        _clang_format(session, tools, ["--dry-run", "--Werror"], sources.cpp_sources())
    except nox.command.CommandFailed:
        session.error("the files above are not formatted as lint checks: `nox -s format` formats them")
    if (ROOT / "Dockerfile").exists():
        run(session, tools, tools.bin("hadolint"), "Dockerfile")
    workflows = ROOT / ".github" / "workflows"
    if workflows.exists():
        run(session, tools, tools.bin("actionlint"))
        for persona in ("regular", "auditor"):  # auditor: every finding, the ones regular deems noise too
            run(session, tools, tools.bin("zizmor"), "--offline", "--persona", persona, str(workflows))


@nox.session(python=False)
def wheel(session: nox.Session) -> None:
    """Build the abi3 wheel, repair it to manylinux into dist/ (torch's libraries left out) and run it in a venv of
    only a CUDA torch and one of only a CPU torch (`-- --cuda-home DIR`, `-- --cuda-arch-list LIST`)."""
    env, tools = project_env(session), tools_env(session)
    args = ["--build-python", env.python, "--auditwheel", tools.bin("auditwheel"), *session.posargs]
    run(session, env, env.python, "tools/wheel.py", *args)


@nox.session(python=False)
def doctor(session: nox.Session) -> None:
    """Diagnose the toolchain: CUDA versions, host compiler, headers, ninja, architectures, memory."""
    env = project_env(session)
    run(session, env, env.python, "tools/doctor.py")


@nox.session(python=False)
def clean(session: nox.Session) -> None:
    """Remove build outputs (`-- envs` also removes the environments in .envs/)."""
    for path in [ROOT / "build", ROOT / "dist", *(ROOT / "custom_op").glob("_C*.so")]:
        if path.exists():
            session.log(f"removing {path.relative_to(ROOT)}")
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if "envs" in session.posargs and paths.ENVS.exists():
        session.log("removing .envs/")
        shutil.rmtree(paths.ENVS)
