"""The small transformer block (parallel_block.py) of the layers the tree's ops declare (OpSpec.block)
trained for a few steps across processes gives the losses of one process: tensor parallel with
sequence parallel and FSDP2 over 2 processes, and both on a 2x2 mesh of 4 (tests/process_pool.py:
gloo on the CPU, NCCL where as many GPUs are visible), in float32."""

from __future__ import annotations

import parallel_block
import pytest
import torch

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(
        not parallel_block.block_specs(),
        reason="no operator's spec declares a layer of the block (OpSpec.block): it would be PyTorch's alone",
    ),
]

# The ids name the block's ops, so that `-k NAME` selects the training of the op it names.
_OPS = "-".join(spec.name for spec in parallel_block.block_specs()) or "pytorch"
LAYOUTS = [
    pytest.param(2, "tensor_and_sequence_parallel", id=f"tp_sp_2-{_OPS}"),
    pytest.param(2, "fsdp", id=f"fsdp2_2-{_OPS}"),
    pytest.param(4, "tensor_parallel_and_fsdp", id=f"tp_sp_x_fsdp2_2x2-{_OPS}"),
]


def _tolerance() -> float:
    """The shared suites' float32 tolerance of the ops in the block, as for their gradients."""
    return 4 * max(spec.rtol[torch.float32] for spec in parallel_block.block_specs())


@pytest.mark.parametrize(("world", "layout"), LAYOUTS)
def test_training_gives_the_single_process_losses(world, layout, process_pools):
    pool = process_pools(world)
    single = pool.run(parallel_block.single_process)[0]
    assert single[-1] < single[0], f"one process: the loss did not fall over {parallel_block.STEPS} steps: {single}"
    for rank, losses in enumerate(pool.run(getattr(parallel_block, layout))):
        torch.testing.assert_close(losses, single, rtol=_tolerance(), atol=0,
                                   msg=lambda m, r=rank: f"{layout}, rank {r}: {m}")  # fmt: skip
