"""Every operator of the registry: each bad input raises a clear error naming the op, the argument,
what was expected and what was given, through the Python API and the registered op, and the fake
kernels (torch.compile, meta tensors) raise the real kernels' message."""

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


def _on_meta(bad):
    """The bad call's arguments on the meta device (its fake kernels), or None where that would not
    ask the same question: a check of values, arguments of the wrong Python type, tensors on
    different devices."""
    tensors = [a for a in bad.args if isinstance(a, torch.Tensor)]
    if bad.reads_values or not all(isinstance(a, torch.Tensor | float | int) for a in bad.args):
        return None
    if len({t.device for t in tensors}) > 1:
        return None
    return tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in bad.args)


def _message(call, args) -> str:
    with pytest.raises(ERRORS) as info:
        call(*args)
    return str(info.value).splitlines()[0]


def test_fake_kernels_raise_the_real_kernels_message(spec, bad_input_id, device):
    """Through the Python API and torch.ops: the fake kernel's message is the real one, word for
    word (a number formatted the same way, the same shapes and names)."""
    bad = _bad(spec, bad_input_id, device)
    meta = _on_meta(bad)
    if meta is None:
        pytest.skip("a check the fake kernels cannot make the same way (values, Python types, devices)")
    for call in (spec.function, spec.overload("custom_op")):
        real = _message(call, bad.args)
        fake = _message(call, meta).replace("meta", device)  # a device in the message is the inputs'
        assert fake == real.replace(f"{device}:0", device), f"{bad.label}: fake {fake!r}, real {real!r}"


@pytest.mark.slow  # one compilation per op
def test_compiled_call_raises_the_real_kernels_message(spec):
    """Under torch.compile(fullgraph=True) the fake kernels run while tracing: the first bad input
    that reads no values raises there what the real kernel raises."""
    bad = next((b for b in spec.bad_inputs_on("cpu") if _on_meta(b) is not None), None)
    if bad is None:
        pytest.skip(f"{spec.name} has no bad input that a fake kernel checks")
    real = _message(spec.function, bad.args)
    torch._dynamo.reset()
    with pytest.raises(ERRORS) as info:  # dynamo wraps it: the real message is inside
        torch.compile(spec.function, fullgraph=True, backend="eager")(*bad.args)
    compiled = str(info.value)
    assert real in compiled, f"{bad.label}: compiled {compiled!r}, real {real!r}"
