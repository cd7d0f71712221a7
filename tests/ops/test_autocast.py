"""Every operator of the registry under torch.autocast: the rule its spec declares
(spec.autocast_dtype), gradients back in the inputs' dtypes, float64 never cast down."""

from __future__ import annotations

import pytest
import torch

from custom_op.testing import Sample, outputs, total


def autocast_dtype(device):
    return torch.bfloat16 if device == "cpu" else torch.float16


def _sample(spec, dtype, device) -> Sample:
    return spec.sample_of_shape((4, 16), dtype, device)


@pytest.mark.parametrize("input_dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
def test_runs_in_the_declared_dtype_under_autocast(spec, input_dtype, device):
    sample = _sample(spec, input_dtype, device)
    with torch.autocast(device, dtype=autocast_dtype(device)):
        out = spec.function(*sample.args, **sample.kwargs)
    runs_in = input_dtype if spec.autocast_dtype is None or input_dtype == torch.float64 else spec.autocast_dtype
    got = [o.dtype for o in outputs(out)]
    assert got == list(spec.output_dtypes(runs_in, len(got))), f"ran in {runs_in}"
    label = f"{spec.name}, a sample of shape (4, 16) under autocast, run in {runs_in}"
    spec.check(out, Sample(sample.cast(runs_in).args, label, sample.kwargs))


def test_gradients_under_autocast_come_back_in_the_inputs_dtypes(spec, device):
    sample = spec.leaves(_sample(spec, torch.bfloat16, device))
    with torch.autocast(device, dtype=autocast_dtype(device)):
        out = spec.function(*sample.args, **sample.kwargs)
    inputs = spec.grad_inputs(sample)
    grads = torch.autograd.grad(total(out), inputs)
    assert [g.dtype for g in grads] == [a.dtype for a in inputs]
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.isolated
def test_mixed_dtypes_under_autocast(spec, device):
    """With an autocast rule, autocast reconciles inputs of two dtypes; without one, the op refuses them."""
    sample = _sample(spec, torch.float32, device)
    tensors = sample.floating
    if len(tensors) < 2:
        pytest.skip(f"{spec.name} takes one floating tensor: no two dtypes to reconcile")
    args = list(sample.args)
    args[tensors[0]] = args[tensors[0]].bfloat16()
    _refuses_mixed_dtypes(spec, args, sample.kwargs)
    with torch.autocast(device, dtype=autocast_dtype(device)):
        if spec.autocast_dtype is None:
            _refuses_mixed_dtypes(spec, args, sample.kwargs)
        else:
            got = [o.dtype for o in outputs(spec.function(*args, **sample.kwargs))]
            assert got == list(spec.output_dtypes(spec.autocast_dtype, len(got)))


def _refuses_mixed_dtypes(spec, args, kwargs):
    """A ValueError naming the op and both dtypes (custom_op.checks.check_pair's, or the op's own)."""
    with pytest.raises(ValueError) as refused:
        spec.function(*args, **kwargs)
    message = str(refused.value)
    assert spec.name in message and "bfloat16" in message and "float32" in message, message
