"""How weighted_square shards across processes (DTensor: tensor and sequence parallel, FSDP2 with TP).

Elementwise: x and w are served under any placement they share (both replicated, or both sharded
over the same dimension), the gradients placed as x; DTensor redistributes other placements to one
of these. Imported when torch.distributed.tensor is (custom_op/_sharding.py).
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.experimental import register_sharding


def _shared(ndim: int) -> list:
    return [Replicate(), *(Shard(dim) for dim in range(ndim))]


def forward_rule(x, w):
    """(placements of y, of x and w) for each case weighted_square serves."""
    return [([p], [p, p]) for p in _shared(x.ndim)]


def backward_rule(grad, x, w):
    """(placements of grad_x and grad_w, of grad, x and w) for each case weighted_square_backward serves."""
    return [([p, p], [p, p, p]) for p in _shared(x.ndim)]


def register(namespace: str) -> None:
    packet = getattr(torch.ops, namespace)
    register_sharding(packet.weighted_square.default)(forward_rule)
    register_sharding(packet.weighted_square_backward.default)(backward_rule)
