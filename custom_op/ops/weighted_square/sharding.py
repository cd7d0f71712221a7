"""How weighted_square shards across processes (DTensor: tensor and sequence parallel, FSDP2 with TP).

Elementwise: x and a weight of x's shape are served under any placement they share (replicated, or
both sharded over the same dimension); a weight of one value per feature follows x's last dimension:
sharded with it, replicated when x is sharded over another dimension (its gradient is then a Partial
sum over each process's rows). Other placements are redistributed by DTensor to one listed here.
The in-place variant is served alike; out= is not (DTensor refuses it). Imported when
torch.distributed.tensor is (custom_op/_sharding.py).
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.experimental import register_sharding


def _per_feature(x, w) -> bool:
    return tuple(w.shape) != tuple(x.shape)  # 1-D with x.shape[-1] values (weights.py)


def _weight_placements(x, w):
    """For each dimension x is sharded over: (w's placement, w's gradient's)."""
    if not _per_feature(x, w):
        return [(Shard(dim), Shard(dim)) for dim in range(x.ndim)]
    last = x.ndim - 1
    return [(Shard(0), Shard(0)) if dim == last else (Replicate(), Partial()) for dim in range(x.ndim)]


def forward_rule(x, w):
    """(placements of y, of x and w) for each case weighted_square serves."""
    cases = [([Replicate()], [Replicate(), Replicate()])]
    for dim, (w_placement, _) in enumerate(_weight_placements(x, w)):
        cases.append(([Shard(dim)], [Shard(dim), w_placement]))
    return cases


def inplace_rule(x, w):
    """(no outputs, placements of x and w) for each case weighted_square_ serves."""
    return [([], inputs) for _, inputs in forward_rule(x, w)]


def backward_rule(grad, x, w, deterministic=False):
    """(placements of grad_x and grad_w, of grad, x, w and deterministic) for each case
    weighted_square_backward serves."""
    cases = [([Replicate(), Replicate()], [Replicate(), Replicate(), Replicate(), None])]
    for dim, (w_placement, grad_w_placement) in enumerate(_weight_placements(x, w)):
        cases.append(([Shard(dim), grad_w_placement], [Shard(dim), Shard(dim), w_placement, None]))
    return cases


def register(namespace: str) -> None:
    packet = getattr(torch.ops, namespace)
    register_sharding(packet.weighted_square.default)(forward_rule)
    register_sharding(packet.weighted_square_.default)(inplace_rule)
    register_sharding(packet.weighted_square_backward.default)(backward_rule)
