"""Every operator of the registry: gradients against eager autograd in float64, gradcheck, through
the public function and through torch.ops.<namespace>.<name> (autograd is on the op)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import prefixed, sample_of

from custom_op._autograd import call_backward
from custom_op.testing import outputs, random, total

ROOT = Path(__file__).resolve().parents[2]
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _grads(spec, function, sample, grads):
    """The gradients of the differentiable inputs, given the gradient of each output."""
    inputs = spec.grad_inputs(sample)
    return torch.autograd.grad(outputs(function(*sample.args, **sample.kwargs)), inputs, grads)


def _registered(spec):
    op = spec.overload("custom_op")
    return lambda *args, **kwargs: spec.op_result(op(*args, **kwargs))


# Every dtype through the public function; float32 through torch.ops.<namespace>.<name>, whose autograd
# is the same registration (the function calls the op).
THROUGH_AND_DTYPE = [
    *(pytest.param("function", d, id=f"function-{str(d).removeprefix('torch.')}") for d in DTYPES),
    pytest.param("registered_op", torch.float32, id="registered_op-float32"),
]


@pytest.mark.parametrize(("through", "dtype"), THROUGH_AND_DTYPE)
def test_gradients_match_eager_float64(spec, grad_sample_id, dtype, device, through):
    sample = sample_of(spec, grad_sample_id, device, dtype)
    function = spec.function if through == "function" else _registered(spec)
    mine = spec.leaves(sample)
    grads = [random(out.shape, out.dtype, device) for out in outputs(function(*mine.args, **mine.kwargs))]
    got = _grads(spec, function, mine, grads)
    ref_sample = spec.leaves(sample, torch.float64)
    want = _grads(spec, spec.reference, ref_sample, [g.double() for g in grads])
    # The same math in the test's dtype: a gradient that cancels (rms_norm's is orthogonal to x) loses digits
    # in any implementation, so the op may be as far from float64 as eager's error, times a margin.
    eager = _grads(spec, spec.reference, spec.leaves(mine), grads)
    # A gradient whose terms cancel to about 0 (KL's q - p at equal inputs, every digit rounding noise)
    # is bounded by the incoming gradient's size, the scale of its terms, as well as by its own.
    incoming = max((g.abs().max().item() for g in grads if g.numel()), default=0.0)
    for i, (g, r, e) in enumerate(zip(got, want, eager, strict=True)):
        assert g.dtype == dtype and g.shape == r.shape, f"{sample.label}: input {i}"
        assert torch.isfinite(r).all(), f"{sample.label}: the reference's gradient of input {i} is not finite"
        # Summed gradients (a broadcast weight) cancel: bound the error by the largest one too.
        tol = 4 * spec.rtol[dtype]
        eager_error = (e.double() - r).abs().max().item()  # a non-finite eager result widens nothing
        largest = r.abs().max().item()
        atol = max(tol * largest, tol * incoming, 4 * eager_error if math.isfinite(eager_error) else 0.0)
        where = (
            f"{spec.name}, sample {sample.label!r}: gradient of input {i} (the reference's largest {largest:.3g}, "
            f"the incoming gradient's {incoming:.3g})"
        )
        torch.testing.assert_close(g.double(), r, rtol=tol, atol=atol, msg=prefixed(where))


@pytest.mark.parametrize("grad_form", ["sum", "expanded_scalar"])
def test_one_value_grad_equals_the_same_grad_dense(spec, grad_sample_id, device, grad_form):
    """The grad that .sum() (and .mean()) passes back is one value expanded, every stride 0: the backward reads it in
    place, and its gradients equal those from the same values in a dense grad."""
    sample = sample_of(spec, grad_sample_id, device, torch.float32)
    mine = spec.leaves(sample)
    inputs = spec.grad_inputs(mine)
    outs = outputs(spec.function(*mine.args, **mine.kwargs))
    value = 1.0 if grad_form == "sum" else 0.75
    if grad_form == "sum":
        got = torch.autograd.grad(sum(out.sum() for out in outs), inputs)
    else:
        one_value = [torch.tensor(value, device=device, dtype=out.dtype).expand(out.shape) for out in outs]
        got = torch.autograd.grad(outs, inputs, one_value)
    fresh = outputs(spec.function(*mine.args, **mine.kwargs))
    want = torch.autograd.grad(fresh, inputs, [torch.full_like(out, value) for out in fresh])
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        # grad_w may be summed in another order (atomics): bound the error by its largest element.
        tol = spec.rtol[torch.float32]
        where = f"{spec.name}, sample {sample.label!r}: gradient of input {i}"
        torch.testing.assert_close(g, w, rtol=tol, atol=tol * w.abs().max().item(), msg=prefixed(where))


@pytest.mark.parametrize("through", ["function", "registered_op"])
def test_gradcheck_float64(spec, gradcheck_sample_id, device, through):
    sample = sample_of(spec, gradcheck_sample_id, device, torch.float64, "gradcheck_sample_id")
    function = spec.function if through == "function" else _registered(spec)
    leaves = spec.leaves(sample)
    assert torch.autograd.gradcheck(lambda *a: function(*a, **leaves.kwargs), leaves.args), sample.label


@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "inputs_without_grad"])
def test_no_graph_without_grad(spec, context, device):
    """Without a gradient to compute, the call records no graph and gives the same values."""
    sample = next(iter(spec.samples_on(device, torch.float32)))
    sample = spec.leaves(sample) if context != "inputs_without_grad" else sample.detached()
    guard = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}.get(context)
    with guard() if guard else torch.enable_grad():
        out = spec.function(*sample.args, **sample.kwargs)
    assert all(o.grad_fn is None and not o.requires_grad for o in outputs(out))
    spec.check(out, sample)


def test_double_backward_is_a_clear_error(spec, device):
    sample = next(s for s in spec.small_float64_samples(device) if s.tensors[0].numel() > 0)
    leaves = spec.leaves(sample)
    inputs = spec.grad_inputs(leaves)
    out = spec.function(*leaves.args, **leaves.kwargs)
    first = torch.autograd.grad(total(out), inputs, create_graph=True)
    if spec.module is not None and any(g.requires_grad for g in first):
        pytest.skip(f"{spec.name} is a Python op of the tests: PyTorch's own ops differentiate its backward")
    if not any(g.requires_grad for g in first):  # the gradient depends on no input: a linear op
        assert _second_derivative_is_zero(spec, sample), (
            f"{spec.name}: its gradient carries no graph, but the reference's second derivative is not 0"
        )
        return
    with pytest.raises(RuntimeError, match=rf"custom_op::{spec.name}: double backward .* not supported"):
        torch.autograd.grad(sum(g.sum() for g in first), inputs)


def _second_derivative_is_zero(spec, sample) -> bool:
    """Whether the float64 reference's gradient (of the sum of its outputs) depends on no input."""
    leaves = spec.leaves(sample.cast(torch.float64, "cpu"))
    inputs = spec.grad_inputs(leaves)
    first = torch.autograd.grad(total(spec.reference(*leaves.args, **leaves.kwargs)), inputs, create_graph=True)
    if not any(g.requires_grad for g in first):
        return True
    second = torch.autograd.grad(sum(g.sum() for g in first), inputs, allow_unused=True)
    return all(s is None or not s.any() for s in second)


def test_backward_op_runs_no_python_in_a_plain_backward(spec, device, monkeypatch):
    """The forward's backward calls its backward op through custom_op._autograd.call_backward; with grad
    mode off (a plain backward) that call reaches the kernel without a Python autograd kernel on the way."""
    module = sys.modules[spec.function.__module__]
    if spec.module is not None or not hasattr(module, "call_backward"):
        pytest.skip(f"{spec.name} calls no backward op of its own through call_backward")
    calls = []
    monkeypatch.setattr(module, "call_backward", lambda public, op, *args: calls.append((op, args)) or op(*args))
    sample = next(s for s in spec.small_float64_samples(device) if s.tensors[0].numel() > 0)
    leaves = spec.leaves(sample)
    torch.autograd.grad(total(spec.function(*leaves.args, **leaves.kwargs)), spec.grad_inputs(leaves))
    assert calls, f"{spec.name}: its backward did not call call_backward"
    op, args = calls[0]
    python_calls = []
    # Python of its own: call_backward, and torch.ops' entry (OpOverload.__call__)
    expected = (call_backward.__code__, type(op).__call__.__code__)

    def record(frame, event, arg):
        if event == "call" and frame.f_code not in expected:
            python_calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    with torch.no_grad():
        sys.setprofile(record)
        try:
            call_backward(spec.name, op, *args)
        finally:
            sys.setprofile(None)
    assert python_calls == [], f"{spec.name}: {op} ran Python with grad mode off: {python_calls}"


def test_import_changes_nothing_in_the_process():
    """`import custom_op` adds no warning filter and changes no global setting of the user's."""
    probe = (
        "import warnings, torch\n"
        "state = lambda: (list(warnings.filters), torch.is_grad_enabled(), torch.get_default_dtype(),\n"
        "                 torch.are_deterministic_algorithms_enabled())\n"
        "before = state()\n"
        "import custom_op\n"
        "assert custom_op.LIBRARY_PATH, 'not loaded'\n"
        "assert state() == before, (before, state())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
