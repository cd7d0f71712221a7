"""`nox -s test -- ARGS` (tools/pytest_args.py): a test id copied from a FAILED line, or a path, runs
that test alone, tests/envs in the tools venv; -k narrows every suite, the environment tests too; other
options keep all."""

from __future__ import annotations

import pytest

from tools import pytest_args

FAILED_ID = (
    "tests/ops/test_sharding.py::test_declared_placements_need_no_communication[scaled_add-alpha_2.5]@multiprocess"
)


def test_a_failed_lines_id_is_given_to_pytest_without_the_group():
    args = pytest_args.as_pytest_takes_them([FAILED_ID, "-x"])
    assert args == [FAILED_ID.removesuffix("@multiprocess"), "-x"]
    assert pytest_args.name_tests([FAILED_ID])


@pytest.mark.parametrize(
    "args, named",
    [
        (["tests/examples/rms_norm"], True),
        (["tests/ops/test_forward.py::test_forward"], True),
        (["-k", "rms_norm"], False),
        (["-krms_norm"], False),
        (["-m", "not multiprocess and not export"], False),
        (["--collect-only", "-q"], False),
        ([], False),
    ],
)
def test_which_arguments_name_tests(args, named):
    assert pytest_args.name_tests(args) == named
    assert pytest_args.as_pytest_takes_them(args) == args


@pytest.mark.parametrize(
    "args, project, envs",
    [
        ([], [], ["tests/envs"]),
        (["-x"], ["-x"], ["tests/envs"]),
        (["-k", "rms_norm"], ["-k", "rms_norm"], ["tests/envs", "-k", "rms_norm"]),
        (["-krms_norm", "-x"], ["-krms_norm", "-x"], ["tests/envs", "-krms_norm"]),
        (["tests/envs/test_rename.py", "-x"], None, ["tests/envs/test_rename.py"]),
        (["tests/envs"], None, ["tests/envs"]),
        (
            ["tests/ops", "tests/envs/", "-v", "-k", "new"],
            ["-v", "-k", "new", "tests/ops"],
            ["tests/envs/", "-k", "new"],
        ),
        ([FAILED_ID], [FAILED_ID.removesuffix("@multiprocess")], None),
    ],
)
def test_each_named_test_runs_in_the_venv_that_has_what_it_needs(args, project, envs):
    assert pytest_args.split_by_venv(args) == (project, envs)
