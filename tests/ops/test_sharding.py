"""Every operator on DTensors over 2 processes (tests/process_pool.py: gloo on the CPU, NCCL on 2
GPUs) against the same op on the whole tensors, forward and gradients, in float32: on the placements
its spec declares (OpSpec.placements: what its sharding rule, ops/<name>/sharding.py, serves), with no
communication; on every other placement of its inputs, which DTensor redistributes to one the rule
serves; and an op that declares none is refused by DTensor rather than run."""

from __future__ import annotations

import pytest
import sharding_checks
import torch
from conftest import SPECS

pytestmark = pytest.mark.multiprocess
WORLD = 2


def test_declared_placements_need_no_communication(spec, sharded_sample_id, process_pools):
    process_pools(WORLD).run(sharding_checks.declared, spec, sharded_sample_id)


def test_every_placement_gives_the_same_result(spec, sharded_sample_id, process_pools):
    process_pools(WORLD).run(sharding_checks.every_placement, spec, sharded_sample_id)


UNDECLARED = [spec for spec in SPECS if spec.placements is None]


@pytest.mark.parametrize("spec", UNDECLARED, ids=[spec.name for spec in UNDECLARED])
def test_an_op_without_placements_is_refused(spec, process_pools):
    first = next(s for s in spec.samples_on("cpu", torch.float32) if s.tensors)
    process_pools(WORLD).run(sharding_checks.refused, spec, first.id)
