"""The cases the shared suites cover: each (operator, kernel path, dtype, device) a check reaches has
a test of it. The kernel paths are each spec's sample labels (OpSpec.samples reaches every path), the
dtypes and devices the suites' parameters (tests/conftest.py). Not every check crosses every axis (a
dtype-independent check runs in float32, opcheck in float64 once per op): CHECKS says which each
covers, and this test fails if a collected suite leaves one of them out. GPU cases count on every
machine: they are collected everywhere (and deselected where no GPU is visible)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from conftest import SAMPLE_SETS, SPECS

HERE = Path(__file__).parent
DTYPES = ("float32", "float64", "float16", "bfloat16")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Check:
    tests: tuple[str, ...]  # test functions (file::name) of tests/ops, any of which covers a case
    samples: str | None  # the sample set (tests/ops/conftest.py SAMPLE_SETS) whose labels are its paths; None: per op
    dtypes: tuple[str | None, ...] = ("float32",)  # what a test without a dtype parameter runs in: the first
    devices: tuple[str | None, ...] = DEVICES  # None: no device parameter (the multiprocess suites pick it)
    only: str | None = None  # an OpSpec field the op must set for the check to apply ("placements")


CHECKS = {
    "values (and the baseline's)": Check(("test_forward.py::test_matches_reference",), "sample_id", DTYPES),
    "the registered op equals the function": Check(("test_forward.py::test_registered_op_equals_python_api",), "sample_id"),
    "inputs left unchanged": Check(("test_forward.py::test_inputs_are_left_unchanged",), "sample_id"),
    "gradients against float64": Check(("test_autograd.py::test_gradients_match_eager_float64",), "grad_sample_id", DTYPES),
    "a one-value grad": Check(("test_autograd.py::test_one_value_grad_equals_the_same_grad_dense",), "grad_sample_id"),
    "gradcheck": Check(("test_autograd.py::test_gradcheck_float64",), "gradcheck_sample_id", ("float64",)),
    "opcheck": Check(("test_compile.py::test_opcheck",), "small_sample_id"),
    "opcheck in float64": Check(("test_compile.py::test_opcheck_float64",), None, ("float64",)),
    "fake kernels' shapes and strides": Check(("test_compile.py::test_fake_kernel_shape_and_strides_match_real",), "small_sample_id"),
    "torch.compile, forward and backward": Check(("test_compile.py::test_compile_fullgraph_forward_and_backward",), None),
    "a bad input's error": Check(("test_errors.py::test_bad_input_raises_a_clear_error",), "bad_input_id", (None,)),
    "the fake kernels' error": Check(("test_errors.py::test_fake_kernels_raise_the_real_kernels_message",), "bad_input_id", (None,)),
    "autocast": Check(("test_autocast.py::test_runs_in_the_declared_dtype_under_autocast",), None, (None,)),
    "DTensor placements": Check(
        ("test_sharding.py::test_declared_placements_need_no_communication",), "sharded_sample_id", devices=(None,), only="placements"
    ),
    "DTensor redistribution": Check(
        ("test_sharding.py::test_every_placement_gives_the_same_result",), "sharded_sample_id", devices=(None,), only="placements"
    ),
}  # fmt: skip


def _name(value) -> str | None:
    return str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else value


def expected(check: Check, specs=SPECS) -> set[tuple]:
    """(op, path, dtype, device) of every case the check must reach."""
    cases = set()
    for spec in specs:
        if check.only is not None and getattr(spec, check.only) is None:
            continue
        paths = [s.id for s in SAMPLE_SETS[check.samples](spec)] if check.samples else [None]
        cases |= {(spec.name, p, d, dev) for p in paths for d in check.dtypes for dev in check.devices}
    return cases


def covered(check: Check, params_by_test: list[tuple[str, dict]]) -> set[tuple]:
    """The cases the check's tests reach, from (file::name, parameters) of each collected test."""
    cases = set()
    for test, params in params_by_test:
        if test in check.tests and "spec" in params:
            path = params.get(check.samples) if check.samples else None
            dtype = _name(params.get("dtype", check.dtypes[0]))
            device = params.get("device") if check.devices != (None,) else None
            cases.add((params["spec"].name, path, dtype, device))
    return cases


def _params(collected_tests) -> list[tuple[str, dict]]:
    found = []
    for item in collected_tests:
        if Path(item.path).parent == HERE:
            callspec = getattr(item, "callspec", None)
            found.append((f"{Path(item.path).name}::{item.originalname}", callspec.params if callspec else {}))
    return found


def test_every_case_has_a_test(collected_tests):
    params = _params(collected_tests)
    files = {test.split("::")[0] for test, _ in params}
    for name, check in CHECKS.items():
        for test in check.tests:
            file = test.split("::")[0]
            if file not in files and (HERE / file).exists():
                pytest.skip(f"{file} was not collected: run the whole of tests/ops to check the matrix")
        missing = sorted(expected(check) - covered(check, params), key=str)
        assert not missing, f"{name}: {len(missing)} cases have no test, e.g. {missing[:5]}"


def test_a_case_left_out_is_found():
    """The check above can fail: one case fewer among the collected tests is reported."""
    check = CHECKS["values (and the baseline's)"]
    spec = SPECS[0]
    first = SAMPLE_SETS["sample_id"](spec)[0].id
    params = [
        (check.tests[0], {"spec": spec, "sample_id": s.id, "dtype": getattr(torch, d), "device": dev})
        for s in SAMPLE_SETS["sample_id"](spec)
        for d in DTYPES
        for dev in DEVICES
    ]
    assert expected(check, [spec]) == covered(check, params)
    fewer = [(t, p) for t, p in params if not (p["sample_id"] == first and p["dtype"] == torch.bfloat16)]
    assert expected(check, [spec]) - covered(check, fewer) == {(spec.name, first, "bfloat16", "cpu"),
                                                                (spec.name, first, "bfloat16", "cuda")}  # fmt: skip
