"""Every operator of the registry, every sample, dtype and backend, against its float64 reference."""

from __future__ import annotations

import inspect

import pytest
import torch
from conftest import prefixed, sample_of

from custom_op.testing import Sample, outputs


def test_matches_reference(spec, sample_id, dtype, device):
    """The op's result, and its baseline's (spec.baseline: the benchmark compares the op with it, so it
    must be the same computation with the same output dtype, in every dtype the benchmark times)."""
    sample = sample_of(spec, sample_id, device, dtype)
    out = spec.function(*sample.args, **sample.kwargs)
    spec.check(out, sample)
    assert all(o.is_contiguous() for o in outputs(out)), sample.label
    if spec.baseline is not None:  # on the same inputs: made once for both
        spec.check(
            spec.baseline(*sample.args, **sample.kwargs),
            Sample(sample.args, f"{sample.label}, the baseline", sample.kwargs),
        )


def test_registered_op_equals_python_api(spec, sample_id, device):
    """torch.ops.<namespace>.<name> gives what the public function gives (spec.op_output picks it)."""
    sample = sample_of(spec, sample_id, device)
    got = spec.op_result(spec.overload("custom_op")(*sample.args, **sample.kwargs))
    torch.testing.assert_close(got, spec.function(*sample.args, **sample.kwargs), rtol=0, atol=0)


def test_inputs_are_left_unchanged(spec, sample_id, device):
    """The call writes no input (integer ones included): each equals a copy taken before."""
    sample = sample_of(spec, sample_id, device)
    before = [t.clone() for t in sample.tensors]
    spec.function(*sample.args, **sample.kwargs)
    for i, (t, copy) in enumerate(zip(sample.tensors, before, strict=True)):
        assert torch.equal(t, copy), f"{sample.label}: tensor argument {i} was changed"


def test_output_is_new_memory(spec, device):
    sample = next(iter(s for s in spec.samples_on(device, torch.float32) if s.tensors[0].numel() > 0))
    inputs = {t.data_ptr() for t in sample.tensors}
    for out in outputs(spec.function(*sample.args, **sample.kwargs)):
        assert out.data_ptr() not in inputs, sample.label


def test_bench_variants_give_the_functions_result(spec, device):
    """The other ways to call an op that the benchmark times (out=, in place) compute what the
    public function does, and leave its inputs unchanged."""
    if spec.bench_variants is None:
        pytest.skip(f"{spec.name}'s spec names no other way to call it")
    for sample in spec.samples_on(device, torch.float32):
        before = [t.clone() for t in sample.tensors]
        want = spec.function(*sample.args, **sample.kwargs)
        for label, variant in spec.bench_variants(sample).items():
            got = variant(*sample.args, **sample.kwargs)
            where = f"{spec.name}, sample {sample.label!r}, {label}"
            torch.testing.assert_close(got, want, rtol=0, atol=0, msg=prefixed(where))
        for t, copy in zip(sample.tensors, before, strict=True):
            assert torch.equal(t, copy), f"{sample.label}: a variant changed an input"


def test_schema_defaults_are_the_python_apis(spec):
    """torch.ops.<namespace>.<name> takes the same defaults as the public function, so a call that
    leaves an argument out works through either."""
    schema = {a.name: a for a in spec.overload("custom_op")._schema.arguments}
    for name, parameter in inspect.signature(spec.function).parameters.items():
        if parameter.default is inspect.Parameter.empty or name not in schema or name == "out":
            continue
        assert schema[name].has_default_value(), f"{spec.name}'s schema gives {name!r} no default"
        assert schema[name].default_value == parameter.default, f"{spec.name}: {name!r}"


@pytest.mark.parametrize("shape", [(6, 8), (5, 3, 8)], ids=str)
def test_rows_of_a_call_are_the_rows_of_its_result(spec, shape):
    """What the test past 2^31 elements does on a GPU, on a small CPU call: the reference of a piece
    of the first input's rows (spec.rows_of: its per-row inputs sliced alike, spec.per_row) is that
    piece of the whole call's reference. A per-row input left whole, or a whole one sliced, fails
    here, without a GPU."""
    if spec.kind == "reduction":
        pytest.skip(f"{spec.name} is a reduction: one result of every element, checked whole")
    sample = spec.sample_of_shape(shape, torch.float64, "cpu")
    whole = outputs(spec.reference_of(sample))
    rows = slice(1, 3)
    try:
        piece = outputs(spec.reference_of(spec.rows_of(sample, rows)))
    except (RuntimeError, ValueError, IndexError) as error:
        raise AssertionError(
            f"{spec.name}: the reference of rows {rows} failed ({error}); does OpSpec.per_row name every per-row input?"
        ) from error
    for got, want in zip(piece, whole, strict=True):
        torch.testing.assert_close(got, want[rows], msg=f"{spec.name}: OpSpec.per_row slices the wrong inputs")
