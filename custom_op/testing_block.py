"""The small transformer block that tests/ops/test_parallel_training.py trains under tensor + sequence
parallel and FSDP2, and bench/parallel.py times: built from the layers the ops' specs declare
(OpSpec.block), with PyTorch's layer in each role no op takes, so it builds in any tree.

Tokens are laid out [sequence, batch, features] (sequence first: sequence parallel shards the loss's
rows): x + down(act(up(norm(x)))), a final norm, an output layer to class scores, the per-token
loss's mean.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

from .testing import OpSpec

EPS = 1e-6

# PyTorch's layer in each role no op takes (half logits cast up first, as users write the loss).
PYTORCH_LAYERS: dict[str, Callable] = {
    "norm": lambda x, weight: F.rms_norm(x, x.shape[-1:], weight, EPS),
    "activation": lambda h: torch.sigmoid(h) * h * h,
    "loss": lambda logits, labels: F.cross_entropy(logits.float(), labels, reduction="none"),
}


def takers(specs: Iterable[OpSpec]) -> dict[str, OpSpec]:
    """The op in each role some op declares: the first by name of those that declare it."""
    taken: dict[str, OpSpec] = {}
    for spec in sorted(specs, key=lambda spec: spec.name):
        if spec.block is not None:
            taken.setdefault(spec.block.role, spec)
    return taken


def layers(specs: Iterable[OpSpec], through: str = "function") -> dict[str, Callable]:
    """Each role's layer: the declaring op's, called through the op (`through="function"`) or its
    baseline (`"baseline"`: the same block in PyTorch's ops); PyTorch's layer where none declares it."""
    chosen = dict(PYTORCH_LAYERS)
    for role, spec in takers(specs).items():
        chosen[role] = functools.partial(spec.block.call, getattr(spec, through))
    return chosen


class Layer(torch.nn.Module):
    """function(x, weight) with a learned weight per feature, about `centre`."""

    def __init__(self, function: Callable, features: int, centre: float) -> None:
        super().__init__()
        self.function = function
        self.weight = torch.nn.Parameter(centre + 0.1 * torch.randn(features))

    def forward(self, x):
        return self.function(x, self.weight)


class Block(torch.nn.Module):
    """The block of `layers` (a callable per role in BLOCK_ROLES); block(x, labels) is the mean loss."""

    def __init__(self, layers: dict[str, Callable], features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.loss = layers["loss"]
        self.norm = Layer(layers["norm"], features, 1.0)
        self.up = torch.nn.Linear(features, hidden, bias=False)
        self.act = layers["activation"]
        self.down = torch.nn.Linear(hidden, features, bias=False)
        self.final_norm = Layer(layers["norm"], features, 1.0)
        self.head = torch.nn.Linear(features, classes, bias=False)

    def forward(self, x, labels):
        x = x + self.down(self.act(self.up(self.norm(x))))
        logits = self.head(self.final_norm(x))
        return self.loss(logits.flatten(0, 1), labels.flatten()).mean()


def tensor_parallel(block: Block, tp_mesh) -> None:
    """Sequence parallel norms and output layer (weights replicated, tokens sharded over the
    sequence), a column- then row-parallel MLP (the activation elementwise on up's sharded outputs)."""
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


def piece(t: torch.Tensor, dim: int, index: int, count: int) -> torch.Tensor:
    """This rank's part of a whole tensor: the `index`th of `count` pieces along `dim`."""
    return t.tensor_split(count, dim)[index]
