"""How rms_norm shards across processes (DTensor: tensor and sequence parallel, FSDP2 with TP).

Each row is normalized on its own, so x sharded over any dimension but the last (batch, sequence:
sequence parallel) is normalized where it lies, with the weight replicated; y and rstd come out
sharded as x is. weight's gradient sums over the rows: each process holds its rows' part, a
Partial sum that DTensor reduces where a replicated value is needed. x sharded over its last
dimension (a row split across processes) is not served: DTensor redistributes it to a placement
listed here first. Imported when torch.distributed.tensor is (custom_op/_sharding.py).
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.experimental import register_sharding


def forward_rule(x, weight, eps=1e-6):  # DTensor leaves out an argument equal to its default
    """(placements of y and rstd, of x, weight and eps) for each case rms_norm_forward serves."""
    cases = [([Replicate(), Replicate()], [Replicate(), Replicate(), None])]
    for dim in range(x.ndim - 1):
        cases.append(([Shard(dim), Shard(dim)], [Shard(dim), Replicate(), None]))
    return cases


def backward_rule(grad, x, weight, rstd):
    """(placements of grad_x and grad_weight, of grad, x, weight and rstd) for each case
    rms_norm_backward serves."""
    cases = [([Replicate(), Replicate()], [Replicate(), Replicate(), Replicate(), Replicate()])]
    for dim in range(x.ndim - 1):
        cases.append(([Shard(dim), Partial()], [Shard(dim), Shard(dim), Replicate(), Shard(dim)]))
    return cases


def register(namespace: str) -> None:
    packet = getattr(torch.ops, namespace)
    register_sharding(packet.rms_norm_forward.default)(forward_rule)
    register_sharding(packet.rms_norm_backward.default)(backward_rule)
