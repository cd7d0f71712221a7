"""An OpSpec's samples as the suites take them: a label as its test id keeps a number's sign (eps=1 and
eps=-1 get ids of their own), gradcheck's default samples leave out expanded inputs, which it refuses, and a spec
function that raises is named with its arguments and the last sample it gave."""

from __future__ import annotations

import pytest
import torch

from custom_op.testing import OpSpec, Sample, id_of


@pytest.mark.parametrize(
    "label, test_id",
    [
        ("eps=-1.0", "eps_-1.0"),
        ("eps=1.0", "eps_1.0"),
        ("ignore_index=-100", "ignore_index_-100"),
        ("0-dim", "0_dim"),
        ("x 1-D, transposed", "x_1_D_transposed"),
        ("", "default"),
    ],
)
def test_a_label_becomes_an_id_that_keeps_a_numbers_sign(label, test_id):
    assert id_of(label) == test_id


def _spec(samples, make_sample=lambda shape, dtype, device: None) -> OpSpec:
    return OpSpec(name="my_op", function=torch.mul, reference=torch.mul, samples=samples,
                  bad_inputs=lambda device: [], make_sample=make_sample,
                  bench_shapes=lambda device, quick: [], bytes_moved=lambda sample, backward: 0)  # fmt: skip


def test_gradchecks_default_samples_are_small_and_not_expanded():
    def samples(device, dtype):
        x = torch.randn(8, dtype=dtype, device=device)
        yield Sample((x, x.clone()), "small")
        yield Sample((x, torch.randn(1, dtype=dtype, device=device).expand(8)), "expanded w")
        yield Sample((torch.randn(65, dtype=dtype), torch.randn(65, dtype=dtype)), "large")

    spec = _spec(samples)
    assert [s.label for s in spec.small_float64_samples("cpu")] == ["small"]


def test_a_spec_function_that_raises_is_named_with_its_arguments_and_last_sample():
    def samples(device, dtype):
        yield Sample((torch.ones(3, dtype=dtype),), "first")
        yield Sample((torch.ones(960, dtype=dtype).view(24, 41),), "bad view")

    def make_sample(shape, dtype, device):
        return Sample((torch.ones(960).view(shape),))

    spec = _spec(samples, make_sample)
    with pytest.raises(
        RuntimeError, match=r"samples\(cpu, float32\) raised after the item labelled 'first': Runt"
    ) as info:
        spec.samples_on("cpu", torch.float32)
    assert "test_op_spec_samples" in str(info.value) and "shape '[24, 41]' is invalid" in str(info.value)
    with pytest.raises(RuntimeError, match=r"make_sample\(\(24, 41\), float32, cpu\) raised RuntimeError: shape"):
        spec.sample_of_shape((24, 41), torch.float32, "cpu")
