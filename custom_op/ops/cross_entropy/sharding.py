"""How cross_entropy shards across processes (DTensor: tensor and sequence parallel, FSDP2 with TP).

Each row's loss needs the whole row of logits: logits and labels sharded over the rows (tokens) give
the loss and the saved log-sum-exp sharded alike, and the backward the gradient of the logits. Logits
sharded over the classes (vocabulary-sharded, from a column-parallel output layer) are not served:
DTensor redistributes them to rows first. Imported when torch.distributed.tensor is
(custom_op/_sharding.py).
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.experimental import register_sharding


def forward_rule(logits, labels, ignore_index=-100):  # DTensor leaves out an argument equal to its default
    """(placements of loss and lse, of logits, labels and ignore_index) for each case
    cross_entropy_forward serves."""
    return [
        ([Replicate(), Replicate()], [Replicate(), Replicate(), None]),
        ([Shard(0), Shard(0)], [Shard(0), Shard(0), None]),
    ]


def backward_rule(grad, logits, labels, lse, ignore_index):
    """(placement of grad_logits, of grad, logits, labels, lse and ignore_index) for each case
    cross_entropy_backward serves."""
    return [
        ([Replicate()], [Replicate(), Replicate(), Replicate(), Replicate(), None]),
        ([Shard(0)], [Shard(0), Shard(0), Shard(0), Shard(0), None]),
    ]


def register(namespace: str) -> None:
    packet = getattr(torch.ops, namespace)
    register_sharding(packet.cross_entropy_forward.default)(forward_rule)
    register_sharding(packet.cross_entropy_backward.default)(backward_rule)
