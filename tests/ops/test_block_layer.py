"""An op's layer of the transformer block (OpSpec.block, custom_op/testing_block.py) on its role's
inputs, on the CPU in float64: of the role's shape, and through the op as through its baseline. A
`call` that does not fit its role fails here, not only in the multi-process training."""

from __future__ import annotations

import pytest
import torch

from custom_op.testing import random


def _role_inputs(role: str, generator: torch.Generator) -> tuple:
    """The role's call in the block's layout (tokens [sequence, batch, features]; the loss on rows)."""
    if role == "norm":
        return random((4, 3, 16), torch.float64, "cpu", generator), random((16,), torch.float64, "cpu", generator)
    if role == "activation":
        return (random((4, 3, 32), torch.float64, "cpu", generator),)
    return random((12, 24), torch.float64, "cpu", generator), torch.randint(0, 24, (12,), generator=generator)


ROLE_SHAPES = {"norm": (4, 3, 16), "activation": (4, 3, 32), "loss": (12,)}


def test_block_layer_fits_its_role_and_matches_its_baseline(spec):
    if spec.block is None:
        pytest.skip(f"{spec.name}'s spec declares no layer of the block (OpSpec.block)")
    role = spec.block.role
    inputs = _role_inputs(role, torch.Generator().manual_seed(0))
    got = spec.block.call(spec.function, *inputs)
    assert tuple(got.shape) == ROLE_SHAPES[role], f"{spec.name} as the block's {role}: shape {tuple(got.shape)}"
    tolerance = 4 * spec.rtol[torch.float64]
    torch.testing.assert_close(got, spec.block.call(spec.baseline, *inputs), rtol=tolerance, atol=tolerance)
