"""Every operator of the registry: each bad input raises a clear error naming the op, the argument,
what was expected and what was given, through the Python API and the registered op."""

from __future__ import annotations

import pytest
import torch
from conftest import sample_of

pytestmark = pytest.mark.isolated  # a crash on bad input fails that case, not the run

ERRORS = (RuntimeError, ValueError, TypeError)


def _bad(spec, bad_input_id, device):
    return sample_of(spec, bad_input_id, device, which="bad_input_id")


def test_bad_input_raises_a_clear_error(spec, bad_input_id, device):
    bad = _bad(spec, bad_input_id, device)
    callers = [spec.function]
    if all(isinstance(a, torch.Tensor | float | int | bool) for a in bad.args):
        callers.append(spec.overload("custom_op"))  # the registered op checks as the Python API does
    for call in callers:
        with pytest.raises(ERRORS) as info:
            call(*bad.args)
        for fragment in bad.fragments:
            assert fragment in str(info.value), f"{bad.label}: {fragment!r} not in {str(info.value)!r}"


def test_the_python_api_raises_value_error_for_tensors_it_refuses(spec, bad_input_id, device):
    bad = _bad(spec, bad_input_id, device)
    if not all(isinstance(a, torch.Tensor | float | int) and not isinstance(a, bool) for a in bad.args):
        pytest.skip("arguments of the wrong Python type: TypeError, checked above")
    with pytest.raises(ValueError):
        spec.function(*bad.args)
