"""The transformer block of the parallel suites and benchmark (custom_op/testing_block.py) is built
from the layers the specs declare (OpSpec.block), with PyTorch's in the other roles: it builds in
any tree, even one without an operator."""

from __future__ import annotations

import re

import pytest
import torch

from custom_op.testing import BlockLayer, OpSpec
from custom_op.testing_block import PYTORCH_LAYERS, Block, layers, takers


def _spec(name: str, role: str, function, baseline) -> OpSpec:
    """A spec of a one-argument op that declares `role` (the rest of the contract left empty)."""
    return OpSpec(name=name, function=function, reference=baseline, samples=lambda device, dtype: [],
                  bad_inputs=lambda device: [], make_sample=lambda shape, dtype, device: None,
                  bench_shapes=lambda device, quick: [], bytes_moved=lambda sample, backward: 0,
                  baseline=baseline, placements=lambda sample: [], block=BlockLayer(role, lambda op, h: op(h)))  # fmt: skip


def test_without_a_declaring_op_every_role_is_pytorchs():
    assert layers([]) == PYTORCH_LAYERS
    assert layers([], through="baseline") == PYTORCH_LAYERS
    block = Block(layers([]), features=8, hidden=16, classes=5)
    loss = block(torch.randn(3, 2, 8), torch.randint(0, 5, (3, 2)))
    loss.backward()
    assert loss.shape == () and torch.isfinite(loss)


def test_a_declared_role_goes_through_the_op_or_its_baseline():
    spec = _spec("some_op", "activation", lambda h: h + 1, lambda h: h + 2)
    h = torch.zeros(3)
    assert layers([spec])["activation"](h).tolist() == [1, 1, 1]
    assert layers([spec], through="baseline")["activation"](h).tolist() == [2, 2, 2]
    assert {role: layers([spec])[role] for role in ("norm", "loss")} == {"norm": PYTORCH_LAYERS["norm"],
                                                                         "loss": PYTORCH_LAYERS["loss"]}  # fmt: skip


def test_the_first_op_by_name_takes_a_role():
    later, first = _spec("b_op", "activation", abs, abs), _spec("a_op", "activation", abs, abs)
    assert takers([later, first]) == {"activation": first}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"block": BlockLayer("attention", abs)}, "must be one of ('norm', 'activation', 'loss'), got 'attention'"),
        ({"baseline": None}, "needs a baseline"),
        ({"placements": None}, "needs placements"),
    ],
    ids=["unknown_role", "no_baseline", "no_placements"],
)
def test_a_block_layer_without_what_the_block_needs_is_refused(change, message):
    spec = _spec("some_op", "norm", abs, abs)
    fields = {name: getattr(spec, name) for name in spec.__dataclass_fields__} | change
    with pytest.raises(ValueError, match=f"OpSpec 'some_op': block.*{re.escape(message)}"):
        OpSpec(**fields)
