"""What `nox -s test -- ARGS` hands pytest: the tests ARGS name, if any, instead of every suite, each
in the venv that runs it (tests/envs in the tools venv, the rest in the project's)."""

from __future__ import annotations

import re

ENVS_TESTS = "tests/envs"

# pytest-xdist's --dist loadgroup appends "@group" to a grouped test's id, and its FAILED line
# prints that id, which pytest does not take back.
_GROUP_SUFFIX = re.compile(r"@\w+$")


def as_pytest_takes_them(args: list[str]) -> list[str]:
    """The arguments, with each test id as pytest selects it (no "@group")."""
    return [_GROUP_SUFFIX.sub("", arg) if "::" in arg else arg for arg in args]


def _names_tests(arg: str) -> bool:
    return arg.startswith("tests/") or "::" in arg


def _in_envs_tests(arg: str) -> bool:
    return arg.rstrip("/") == ENVS_TESTS or arg.startswith(ENVS_TESTS + "/")


def name_tests(args: list[str]) -> bool:
    """Whether the arguments name tests (a path under tests/ or a test id): then only those run."""
    return any(_names_tests(arg) for arg in args)


def choose_tests(args: list[str]) -> bool:
    """Whether the arguments choose tests (by name, or with -k): the environment tests run only if named."""
    return name_tests(args) or any(arg.startswith("-k") for arg in args)


def split_by_venv(args: list[str]) -> tuple[list[str] | None, list[str] | None]:
    """pytest's arguments in the project's venv and in the tools venv, None where that venv runs nothing.

    Nothing named: the project's venv gets every argument (the caller adds its suites), and the tools venv
    runs tests/envs unless -k chooses tests. Tests named: each venv gets its own, with every option."""
    args = as_pytest_takes_them(args)
    if not name_tests(args):
        return args, (None if choose_tests(args) else [ENVS_TESTS])
    options = [arg for arg in args if not _names_tests(arg)]
    envs = [arg for arg in args if _names_tests(arg) and _in_envs_tests(arg)]
    project = [arg for arg in args if _names_tests(arg) and not _in_envs_tests(arg)]
    return (options + project if project else None), (options + envs if envs else None)
