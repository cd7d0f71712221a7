"""An OpSpec's samples as the suites take them: a label as its test id keeps a number's sign (eps=1 and
eps=-1 get ids of their own), and gradcheck's default samples leave out expanded inputs, which it refuses."""

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


def test_gradchecks_default_samples_are_small_and_not_expanded():
    def samples(device, dtype):
        x = torch.randn(8, dtype=dtype, device=device)
        yield Sample((x, x.clone()), "small")
        yield Sample((x, torch.randn(1, dtype=dtype, device=device).expand(8)), "expanded w")
        yield Sample((torch.randn(65, dtype=dtype), torch.randn(65, dtype=dtype)), "large")

    spec = OpSpec(name="my_op", function=torch.mul, reference=torch.mul, samples=samples,
                  bad_inputs=lambda device: [], make_sample=lambda shape, dtype, device: None,
                  bench_shapes=lambda device, quick: [], bytes_moved=lambda sample, backward: 0)  # fmt: skip
    assert [s.label for s in spec.small_float64_samples("cpu")] == ["small"]
