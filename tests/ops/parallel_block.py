"""A small transformer block built of the example operators, trained for a few steps in one process
and across the ranks of a process pool (tests/process_pool.py): tensor parallel with sequence
parallel, FSDP2, and both on a 2-D mesh (test_parallel_training.py).

The block, tokens laid out [sequence, batch, features] (sequence first, so that the rows of the loss
are the sequence's shards): x + down(act(up(norm(x)))), then a norm, an output layer to class scores
and the per-token loss's mean. rms_norm is the norms, weighted_square (a learned weight per feature
times the square) the activation, cross_entropy the loss; PyTorch's ops stand in for those the tree
lacks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from process_pool import device, mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

import custom_op
from custom_op import ops

EXAMPLES = ("rms_norm", "weighted_square", "cross_entropy")
SEQUENCE, BATCH, FEATURES, HIDDEN, CLASSES = 8, 4, 16, 32, 24
STEPS = 3
EPS = 1e-6


def examples() -> list[str]:
    return [name for name in EXAMPLES if name in ops.OPERATORS]


def _norm(x, weight):
    if "rms_norm" in ops.OPERATORS:
        return custom_op.rms_norm(x, weight, EPS)
    return F.rms_norm(x, x.shape[-1:], weight, EPS)


def _activation(x, weight):
    if "weighted_square" in ops.OPERATORS:
        return custom_op.weighted_square(x, weight)
    return weight * x * x


def _loss(logits, labels):
    if "cross_entropy" in ops.OPERATORS:
        return custom_op.cross_entropy(logits, labels)
    return F.cross_entropy(logits, labels, reduction="none")


class Layer(torch.nn.Module):
    """function(x, weight) with a learned weight per feature, about `centre`."""

    def __init__(self, function, features: int, centre: float) -> None:
        super().__init__()
        self.function = function
        self.weight = torch.nn.Parameter(centre + 0.1 * torch.randn(features))

    def forward(self, x):
        return self.function(x, self.weight)


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = Layer(_norm, FEATURES, 1.0)
        self.up = torch.nn.Linear(FEATURES, HIDDEN, bias=False)
        self.act = Layer(_activation, HIDDEN, 0.5)
        self.down = torch.nn.Linear(HIDDEN, FEATURES, bias=False)
        self.final_norm = Layer(_norm, FEATURES, 1.0)
        self.head = torch.nn.Linear(FEATURES, CLASSES, bias=False)

    def forward(self, x, labels):
        x = x + self.down(self.act(self.up(self.norm(x))))
        logits = self.head(self.final_norm(x))
        return _loss(logits.flatten(0, 1), labels.flatten()).mean()


def _model_and_batch():
    """The same block and batch in every rank (a fixed seed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        block = Block().to(device())
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


def _tensor_parallel(block, tp_mesh) -> None:
    """Sequence parallel norms and output layer (weights replicated, tokens sharded over the
    sequence), a column- then row-parallel MLP whose activation weight is sharded with up's outputs."""
    parallelize_module(
        block,
        tp_mesh,
        {
            "norm": SequenceParallel(sequence_dim=0),
            "up": ColwiseParallel(input_layouts=Shard(0), use_local_output=False),
            "down": RowwiseParallel(output_layouts=Shard(0)),
            "final_norm": SequenceParallel(sequence_dim=0),
            "head": SequenceParallel(sequence_dim=0),
        },
    )
    block.act.weight = torch.nn.Parameter(distribute_tensor(block.act.weight.detach(), tp_mesh, [Shard(0)]))


def _piece(t: torch.Tensor, dim: int, index: int, count: int) -> torch.Tensor:
    return t.tensor_split(count, dim)[index]


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
    _tensor_parallel(block, tp_mesh)
    rank, world = tp_mesh.get_local_rank(), tp_mesh.size()
    labels = DTensor.from_local(_piece(labels, 0, rank, world), tp_mesh, [Shard(0)])
    return [loss.item() for loss in _train(block, _piece(x, 0, rank, world), labels)]


def fsdp() -> list[float]:
    """Every rank a data-parallel rank: its shard of the batch, the parameters sharded (FSDP2)."""
    dp_mesh = mesh((torch.distributed.get_world_size(),), ("dp",))
    block, x, labels = _model_and_batch()
    fully_shard(block, mesh=dp_mesh)
    rank, world = dp_mesh.get_local_rank(), dp_mesh.size()
    losses = _train(block, _piece(x, 1, rank, world), _piece(labels, 1, rank, world))
    return _mean_over(dp_mesh.get_group(), losses)


def tensor_parallel_and_fsdp() -> list[float]:
    """A 2-D mesh: data parallel (FSDP2) over the batch, tensor and sequence parallel within."""
    world = torch.distributed.get_world_size()
    grid = mesh((world // 2, 2), ("dp", "tp"))
    dp_mesh, tp_mesh = grid["dp"], grid["tp"]
    block, x, labels = _model_and_batch()
    _tensor_parallel(block, tp_mesh)
    fully_shard(block, mesh=dp_mesh)
    dp, tp = dp_mesh.get_local_rank(), tp_mesh.get_local_rank()
    x = _piece(_piece(x, 1, dp, dp_mesh.size()), 0, tp, tp_mesh.size())
    labels = _piece(_piece(labels, 1, dp, dp_mesh.size()), 0, tp, tp_mesh.size())
    losses = _train(block, x, DTensor.from_local(labels, tp_mesh, [Shard(0)]))
    return _mean_over(dp_mesh.get_group(), losses)
