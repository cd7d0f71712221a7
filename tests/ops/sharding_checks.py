"""The sharding suite's checks (test_sharding.py), run in every rank of a process pool
(tests/process_pool.py): an op on DTensors against the same op on the whole tensors, in float32."""

from __future__ import annotations

import itertools

import torch
from process_pool import device, mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

from custom_op import _sharding
from custom_op.testing import outputs, random


def _sample(spec, sample_id: str):
    # Else DTensor says only that the op has no sharding strategy, not why.
    assert not _sharding.failed, "sharding rules not registered: " + "; ".join(
        f"{module}: {error}" for module, error in _sharding.failed.items()
    )
    return {s.id: s for s in spec.samples_on(device(), torch.float32)}[sample_id]


def _line():
    return mesh((torch.distributed.get_world_size(),))


def _names(placements) -> str:
    return "(" + ", ".join("-" if p is None else str(p) for p in placements) + ")"


def _collectives(comm: CommDebugMode) -> str:
    return ", ".join(f"{getattr(op, '__name__', op)} x{n}" for op, n in comm.get_comm_counts().items())


def _close(got, want, tol: float, what: str) -> None:
    assert isinstance(got, DTensor), f"{what}: a {type(got).__name__}, expected a DTensor"
    got = got.full_tensor()
    if not want.is_floating_point():
        assert torch.equal(got, want), f"{what}: differs from the op's on whole tensors"
        return
    atol = tol * want.abs().max().item() if want.numel() else 0.0
    torch.testing.assert_close(got, want, rtol=tol, atol=atol, msg=lambda m: f"{what}: {m}")


def _check(spec, sample, placements, quiet: bool) -> None:
    """The op on DTensors of `placements` (a 1-D mesh of every rank) gives its result on whole
    tensors, forward and gradients; `quiet`: with no collective (the rule serves the placements)."""
    where = f"{spec.name} {sample.label} {_names(placements)}"
    tol = 4 * spec.rtol[torch.float32]
    generator = torch.Generator().manual_seed(0)  # the same gradients in every rank
    leaves = spec.leaves(sample)
    want = outputs(spec.function(*leaves.args, **leaves.kwargs))
    grads = [random(out.shape, out.dtype, device(), generator) if out.requires_grad else None for out in want]
    flows = [k for k, out in enumerate(want) if out.requires_grad]
    inputs = spec.grad_inputs(leaves)
    want_grads = []
    if flows and inputs:
        want_grads = torch.autograd.grad([want[k] for k in flows], inputs, [grads[k] for k in flows], allow_unused=True)

    line = _line()
    spread = sample.with_args(
        distribute_tensor(a, line, [p]) if isinstance(a, torch.Tensor) else a
        for a, p in zip(sample.args, placements, strict=True)
    )
    dleaves = spec.leaves(spread)
    with CommDebugMode() as comm:
        got = outputs(spec.function(*dleaves.args, **dleaves.kwargs))
    assert not quiet or comm.get_total_counts() == 0, (
        f"{where}: the forward's sharding rule does not serve these placements: DTensor redistributed "
        f"({_collectives(comm)})"
    )
    assert len(got) == len(want), f"{where}: {len(got)} outputs, expected {len(want)}"
    got_grads = []
    if want_grads:
        # each output's gradient placed as the output is (a partial sum's as a replicated value)
        dgrads = [
            distribute_tensor(grads[k], line, [Replicate() if p.is_partial() else p for p in got[k].placements])
            for k in flows
        ]
        with CommDebugMode() as comm:
            got_grads = torch.autograd.grad([got[k] for k in flows], spec.grad_inputs(dleaves), dgrads,
                                            allow_unused=True)  # fmt: skip
        assert not quiet or comm.get_total_counts() == 0, (
            f"{where}: the backward's sharding rule does not serve these placements: DTensor redistributed "
            f"({_collectives(comm)})"
        )
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _close(g, w.detach(), tol, f"{where}: output {k}")
    for i, (g, w) in enumerate(zip(got_grads, want_grads, strict=True)):
        assert (g is None) == (w is None), f"{where}: gradient of input {i}: {g} where the op gives {w}"
        if w is not None:
            _close(g, w, tol, f"{where}: gradient of input {i}")


def _shardable(sample, placements) -> bool:
    """Whether each sharded dimension has a slice for every rank: DTensor uses no case of a rule
    that shards a shorter one, and replicates instead."""
    world = torch.distributed.get_world_size()
    return all(
        a.shape[p.dim] >= world
        for a, p in zip(sample.args, placements, strict=True)
        if isinstance(p, Shard) and isinstance(a, torch.Tensor)
    )


def declared(spec, sample_id: str) -> None:
    """Each placement the spec declares: the op's result, with no collective where DTensor can
    shard the inputs so."""
    sample = _sample(spec, sample_id)
    for placements in spec.declared_placements(sample):
        _check(spec, sample, placements, quiet=_shardable(sample, placements))


def every_placement(spec, sample_id: str) -> None:
    """Each tensor replicated or sharded over any of its dimensions, in every combination: the op's
    result, whatever DTensor redistributes first."""
    sample = _sample(spec, sample_id)
    choices = [
        [Replicate(), *(Shard(d) for d in range(a.ndim))] if isinstance(a, torch.Tensor) else [None]
        for a in sample.args
    ]
    for placements in itertools.product(*choices):
        _check(spec, sample, placements, quiet=False)


def refused(spec, sample_id: str) -> None:
    """An op without a rule: DTensor raises, naming the op, rather than running it."""
    sample = _sample(spec, sample_id)
    line = _line()
    spread = [distribute_tensor(a, line, [Replicate()]) if isinstance(a, torch.Tensor) else a for a in sample.args]
    try:
        spec.function(*spread, **sample.kwargs)
    except NotImplementedError as error:
        assert "does not have a sharding strategy registered" in str(error), str(error)
        return
    raise AssertionError(
        f"{spec.name}: DTensor ran the op, yet its spec declares no placements: declare those its rule "
        "serves (OpSpec.placements)"
    )
