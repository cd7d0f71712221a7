"""The small transformer block of custom_op/testing_block.py (the one bench/parallel.py times), of
the layers the tree's ops declare (OpSpec.block) and PyTorch's in the other roles, trained for a few
steps in one process and across the ranks of a process pool (tests/process_pool.py): tensor parallel
with sequence parallel, FSDP2, and both on a 2-D mesh (test_parallel_training.py)."""

from __future__ import annotations

import torch
from process_pool import device, mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Shard

from custom_op import ops
from custom_op.testing_block import Block, layers, piece, takers, tensor_parallel

SEQUENCE, BATCH, FEATURES, HIDDEN, CLASSES = 8, 4, 16, 32, 24
STEPS = 3


def block_specs() -> list:
    """The specs of the ops in the block: each the first by name to declare its role."""
    return list(takers(ops.specs()).values())


def _model_and_batch():
    """The same block and batch in every rank (a fixed seed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        block = Block(layers(ops.specs()), FEATURES, HIDDEN, CLASSES).to(device())
        x = torch.randn(SEQUENCE, BATCH, FEATURES).to(device())
        labels = torch.randint(0, CLASSES, (SEQUENCE, BATCH)).to(device())
    return block, x, labels


def _train(block, x, labels) -> list[torch.Tensor]:
    """SGD steps on the batch; each step's loss (a DTensor's as its whole value)."""
    optimizer = torch.optim.SGD(block.parameters(), lr=0.2)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = block(x, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.full_tensor() if isinstance(loss, DTensor) else loss.detach())
    return losses


def _mean_over(group, losses: list) -> list[float]:
    """Each step's loss averaged over the ranks of a group (each rank's tokens the same count)."""
    stacked = torch.stack([loss.reshape(()) for loss in losses]).double()
    torch.distributed.all_reduce(stacked, group=group)
    return (stacked / torch.distributed.get_world_size(group)).tolist()


def single_process() -> list[float]:
    block, x, labels = _model_and_batch()
    return [loss.item() for loss in _train(block, x, labels)]


def tensor_and_sequence_parallel() -> list[float]:
    """Every rank a tensor-parallel rank: its shard of the sequence, the batch whole."""
    tp_mesh = mesh((torch.distributed.get_world_size(),), ("tp",))
    block, x, labels = _model_and_batch()
    tensor_parallel(block, tp_mesh)
    rank, world = tp_mesh.get_local_rank(), tp_mesh.size()
    labels = DTensor.from_local(piece(labels, 0, rank, world), tp_mesh, [Shard(0)])
    return [loss.item() for loss in _train(block, piece(x, 0, rank, world), labels)]


def fsdp() -> list[float]:
    """Every rank a data-parallel rank: its shard of the batch, the parameters sharded (FSDP2)."""
    dp_mesh = mesh((torch.distributed.get_world_size(),), ("dp",))
    block, x, labels = _model_and_batch()
    fully_shard(block, mesh=dp_mesh)
    rank, world = dp_mesh.get_local_rank(), dp_mesh.size()
    losses = _train(block, piece(x, 1, rank, world), piece(labels, 1, rank, world))
    return _mean_over(dp_mesh.get_group(), losses)


def tensor_parallel_and_fsdp() -> list[float]:
    """A 2-D mesh: data parallel (FSDP2) over the batch, tensor and sequence parallel within."""
    world = torch.distributed.get_world_size()
    grid = mesh((world // 2, 2), ("dp", "tp"))
    dp_mesh, tp_mesh = grid["dp"], grid["tp"]
    block, x, labels = _model_and_batch()
    tensor_parallel(block, tp_mesh)
    fully_shard(block, mesh=dp_mesh)
    dp, tp = dp_mesh.get_local_rank(), tp_mesh.get_local_rank()
    x = piece(piece(x, 1, dp, dp_mesh.size()), 0, tp, tp_mesh.size())
    labels = piece(piece(labels, 1, dp, dp_mesh.size()), 0, tp, tp_mesh.size())
    losses = _train(block, x, DTensor.from_local(labels, tp_mesh, [Shard(0)]))
    return _mean_over(dp_mesh.get_group(), losses)
