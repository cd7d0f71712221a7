"""DistributedDataParallel over each operator's training model (its spec's `training`): two
processes (gloo on the CPU, NCCL on two GPUs), each on its shard of the batch, train to the same
weights as one process on the whole batch. The model, its parameters and its batch (labels
included) come from a generator seeded by the op's name, so every process builds the same."""

from __future__ import annotations

import gc
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

WORLD = 2
STEPS = 3


def _case(spec, device):
    return spec.training_case(device, torch.float64, quick=True)


def _shard(batch, rank, world):
    """Each tensor of the batch split along its first dimension (examples, and their labels)."""
    return tuple(t[rank::world] if isinstance(t, torch.Tensor) and t.dim() > 0 else t for t in batch)


def train(model, batch, rank=0, world=1):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    mine = _shard(batch, rank, world)
    for _ in range(STEPS):
        optimizer.zero_grad()
        model(*mine).backward()  # the loss is a mean over the shard: DDP's average is the whole batch's
        optimizer.step()
    return model


def _worker(rank, spec, backend, init_file, result_file):
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        if backend == "nccl":
            torch.cuda.set_device(rank)
        case = _case(spec, device)
        ddp = DistributedDataParallel(case.custom, device_ids=[rank] if backend == "nccl" else None)
        train(ddp, case.batch, rank, WORLD)
        if rank == 0:
            torch.save({k: v.cpu() for k, v in case.custom.state_dict().items()}, result_file)
        # The DDP reducer's pending gloo work holds tensors: freed while the interpreter is whole,
        # not at its teardown, where a gloo thread releasing them aborted the rank (SIGABRT, about
        # 1 run in 10 on the 2-core CI machine).
        del ddp, case
        gc.collect()
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    "backend",
    [
        "gloo",
        pytest.param(
            "nccl",
            marks=[
                pytest.mark.gpu,
                pytest.mark.multi_gpu,
                pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"),
            ],
        ),
    ],
)
def test_ddp_matches_single_process(spec, backend, tmp_path):
    if spec.training is None:
        pytest.skip(f"{spec.name}'s spec declares no training model (OpSpec.training)")
    device = "cuda:0" if backend == "nccl" else "cpu"
    reference = _case(spec, device)
    before = {k: v.clone() for k, v in reference.custom.state_dict().items()}
    single = train(reference.custom, reference.batch)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    mp.spawn(_worker, args=(spec, backend, str(tmp_path / "init"), str(tmp_path / "ddp.pt")), nprocs=WORLD, join=True)
    trained = torch.load(tmp_path / "ddp.pt")
    moved = False
    for name, value in single.state_dict().items():
        torch.testing.assert_close(
            trained[name], value.cpu(), rtol=1e-10, atol=1e-12, msg=lambda m, n=name: f"{spec.name} {n}: {m}"
        )
        moved |= not torch.equal(value.cpu(), before[name].cpu())
    assert moved, f"{spec.name}: training did not change the weights"
