"""OpSpec.declared_placements: a placements case that does not fit the sample's arguments is refused
with a message naming the op, the sample and what each argument needs, before DTensor sees it."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.tensor import Replicate, Shard

from custom_op.testing import OpSpec, Sample


def _spec(placements) -> OpSpec:
    """A spec of a (tensor, tensor, float) op that declares `placements` (the rest left empty)."""
    return OpSpec(name="scaled_add", function=torch.add, reference=torch.add, samples=lambda device, dtype: [],
                  bad_inputs=lambda device: [], make_sample=lambda shape, dtype, device: None,
                  bench_shapes=lambda device, quick: [], bytes_moved=lambda sample, backward: 0,
                  placements=placements)  # fmt: skip


SAMPLE = Sample((torch.zeros(4, 2), torch.zeros(4, 2), 2.5), "alpha 2.5")


def test_cases_that_fit_the_sample_are_given_back():
    cases = [(Replicate(), Replicate(), None), (Shard(0), Shard(0), None)]
    assert _spec(lambda sample: iter(cases)).declared_placements(SAMPLE) == cases


@pytest.mark.parametrize(
    "case", [(Replicate(), Replicate()), (Shard(0), None, None)], ids=["an entry short", "None for a tensor"]
)
def test_a_case_that_does_not_fit_names_what_each_argument_needs(case):
    with pytest.raises(ValueError) as error:
        _spec(lambda sample: [case]).declared_placements(SAMPLE)
    message = str(error.value)
    assert "OpSpec 'scaled_add'" in message and "'alpha 2.5'" in message
    assert "(a Placement, a Placement, None)" in message and "None for the others" in message
