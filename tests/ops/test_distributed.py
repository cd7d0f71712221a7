"""DistributedDataParallel over every operator of the registry: two processes (gloo on the CPU,
NCCL on two GPUs) train to the same weights as one process on the whole batch."""

from __future__ import annotations

import gc
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from custom_op import ops

WORLD = 2
STEPS = 4
FEATURES = 32


# Where an operator's argument is one of the model's parameters.
WEIGHT = object()


class Model(nn.Module):
    """A linear layer, then each operator of the registry on each example's features: the
    operator's first argument is the example, its other floating tensors (from its make_sample)
    are parameters, the rest of its arguments are passed as they are. One value per example: the
    sum of every operator's outputs."""

    def __init__(self):
        super().__init__()
        self.specs = ops.specs()
        self.linear = nn.Linear(16, FEATURES, dtype=torch.float64)
        self.calls = []  # per operator: its arguments after the first (WEIGHT for a parameter), its kwargs
        self.weights = nn.ModuleList()  # per operator: its parameters, in the order of its arguments
        for spec in self.specs:
            sample = spec.make_sample((FEATURES,), torch.float64, "cpu")
            floating = [isinstance(a, torch.Tensor) and a.is_floating_point() for a in sample.args[1:]]
            rest = [WEIGHT if f else a for a, f in zip(sample.args[1:], floating, strict=True)]
            weights = [nn.Parameter(a.detach().clone()) for a, f in zip(sample.args[1:], floating, strict=True) if f]
            self.calls.append((rest, sample.kwargs))
            self.weights.append(nn.ParameterList(weights))

    def forward(self, x):
        h = self.linear(x)
        total = torch.zeros(len(x), dtype=h.dtype, device=h.device)
        for spec, (rest, kwargs), weights in zip(self.specs, self.calls, self.weights, strict=True):
            given = iter(weights)
            args = [next(given) if a is WEIGHT else a for a in rest]
            total = total + torch.stack([spec.function(row, *args, **kwargs).sum() for row in h])
        return total


def batches(device):
    gen = torch.Generator().manual_seed(1)
    return [
        (
            (0.3 * torch.randn(8, 16, generator=gen, dtype=torch.float64)).to(device),
            torch.randn(8, generator=gen, dtype=torch.float64).to(device),
        )
        for _ in range(STEPS)
    ]


def train(model, data, rank=0, world=1):
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    for x, y in data:
        optimizer.zero_grad()
        # each rank takes its share of the batch; DDP averages the gradients
        loss = ((model(x[rank::world]) - y[rank::world]) ** 2).mean()
        loss.backward()
        optimizer.step()
    return model


def _worker(rank, backend, init_file, state, result_file):
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        if backend == "nccl":
            torch.cuda.set_device(rank)
        model = Model().to(device)
        model.load_state_dict(state)
        ddp = DistributedDataParallel(model, device_ids=[rank] if backend == "nccl" else None)
        train(ddp, batches(device), rank, WORLD)
        if rank == 0:
            torch.save({k: v.cpu() for k, v in model.state_dict().items()}, result_file)
        # The DDP reducer's pending gloo work holds tensors: freed while the interpreter is whole,
        # not at its teardown, where a gloo thread releasing them aborted the rank (SIGABRT, about
        # 1 run in 10 on the 2-core CI machine).
        del ddp, model
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
def test_ddp_matches_single_process(backend, tmp_path):
    if not ops.specs():
        pytest.skip("no operator in the registry")
    torch.manual_seed(0)
    reference = Model()
    state = {k: v.clone() for k, v in reference.state_dict().items()}
    device = "cuda:0" if backend == "nccl" else "cpu"
    single = train(reference.to(device), batches(device))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    mp.spawn(_worker, args=(backend, str(tmp_path / "init"), state, str(tmp_path / "ddp.pt")), nprocs=WORLD, join=True)
    trained = torch.load(tmp_path / "ddp.pt")
    moved = False
    for name, value in single.state_dict().items():
        torch.testing.assert_close(trained[name], value.cpu(), rtol=1e-10, atol=1e-12)
        moved |= not torch.equal(value.cpu(), state[name])
    assert moved, "training did not change the weights"
