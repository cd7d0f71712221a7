"""Every operator of the registry: bad input raises a clear error naming the op, the argument,
what was expected and what was given, through the Python API and the registered op."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.isolated  # a crash on bad input fails that case, not the run

ERRORS = (RuntimeError, ValueError, TypeError)


def test_bad_input_raises_a_clear_error(spec, device):
    op = spec.overload("custom_op")
    for bad in spec.bad_inputs(device):
        callers = [spec.function]
        if all(isinstance(a, torch.Tensor | float | int | bool) for a in bad.args):
            callers.append(op)  # the registered op checks as the Python API does
        for call in callers:
            with pytest.raises(ERRORS) as info:
                call(*bad.args)
            for fragment in bad.fragments:
                assert fragment in str(info.value), f"{bad.label}: {fragment!r} not in {str(info.value)!r}"


def test_the_python_api_raises_value_error_for_tensors_it_refuses(spec, device):
    for bad in spec.bad_inputs(device):
        if all(isinstance(a, torch.Tensor) for a in bad.args):
            with pytest.raises(ValueError):
                spec.function(*bad.args)
