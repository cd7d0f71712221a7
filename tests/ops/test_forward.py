"""Every operator of the registry, every sample, dtype and backend, against its float64 reference."""

from __future__ import annotations

import pytest
import torch
from conftest import sample_of


def test_matches_reference(spec, sample_id, dtype, device):
    sample = sample_of(spec, sample_id, device, dtype)
    out = spec.function(*sample.args, **sample.kwargs)
    spec.check(out, sample)
    assert out.is_contiguous(), sample.label


def test_registered_op_equals_python_api(spec, sample_id, device):
    """torch.ops.<namespace>.<name> gives what the public function gives (spec.op_output picks it)."""
    sample = sample_of(spec, sample_id, device)
    got = spec.op_result(spec.overload("custom_op")(*sample.args, **sample.kwargs))
    torch.testing.assert_close(got, spec.function(*sample.args, **sample.kwargs), rtol=0, atol=0)


def test_output_is_new_memory(spec, device):
    sample = next(iter(s for s in spec.samples(device, torch.float32) if s.tensors[0].numel() > 0))
    out = spec.function(*sample.args, **sample.kwargs)
    assert out.data_ptr() not in {t.data_ptr() for t in sample.tensors}


def test_baseline_computes_the_reference_math(spec, sample_id, device):
    """The benchmark compares the op with its baseline: that must be the same computation."""
    if spec.baseline is None:
        pytest.skip(f"{spec.name}'s spec names no baseline: the benchmark times it alone")
    sample = sample_of(spec, sample_id, device, torch.float64)
    spec.check(spec.baseline(*sample.args, **sample.kwargs), sample)
