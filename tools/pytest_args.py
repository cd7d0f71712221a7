"""What `nox -s test -- ARGS` hands pytest: the tests ARGS name, if any, instead of every suite."""

from __future__ import annotations

import re

# pytest-xdist's --dist loadgroup appends "@group" to a grouped test's id, and its FAILED line
# prints that id, which pytest does not take back.
_GROUP_SUFFIX = re.compile(r"@\w+$")


def as_pytest_takes_them(args: list[str]) -> list[str]:
    """The arguments, with each test id as pytest selects it (no "@group")."""
    return [_GROUP_SUFFIX.sub("", arg) if "::" in arg else arg for arg in args]


def name_tests(args: list[str]) -> bool:
    """Whether the arguments name tests (a path under tests/ or a test id): then only those run."""
    return any(arg.startswith("tests/") or "::" in arg for arg in args)


def choose_tests(args: list[str]) -> bool:
    """Whether the arguments choose tests (by name, or with -k): the environment tests stay out."""
    return name_tests(args) or any(arg.startswith("-k") for arg in args)
