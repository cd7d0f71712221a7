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


def _keyword_args(args: list[str]) -> list[str]:
    """The -k expressions among the arguments, as given ("-k", EXPR or "-kEXPR")."""
    chosen = []
    for i, arg in enumerate(args):
        if arg == "-k" and i + 1 < len(args):
            chosen += [arg, args[i + 1]]
        elif arg.startswith("-k") and arg != "-k":
            chosen.append(arg)
    return chosen


def split_by_venv(args: list[str]) -> tuple[list[str] | None, list[str] | None]:
    """pytest's arguments in the project's venv and in the tools venv, None where that venv runs nothing.

    Nothing named: the project's venv gets every argument (the caller adds its suites) and the tools venv
    runs tests/envs, narrowed by -k where given (an op's floor plan, checks and docs carry its name).
    Tests named: each venv runs its own, the project's with every option, tests/envs with -k alone (the
    tools venv has no pytest-xdist)."""
    args = as_pytest_takes_them(args)
    keyword = _keyword_args(args)
    if not name_tests(args):
        return args, [ENVS_TESTS, *keyword]
    options = [arg for arg in args if not _names_tests(arg)]
    envs = [arg for arg in args if _names_tests(arg) and _in_envs_tests(arg)]
    project = [arg for arg in args if _names_tests(arg) and not _in_envs_tests(arg)]
    return (options + project if project else None), ([*envs, *keyword] if envs else None)
