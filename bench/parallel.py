"""A transformer block of the example operators trained under tensor + sequence parallel and under
FSDP2, through the tree's operators and through PyTorch's own, as tokens per second:

    torchrun --standalone --nproc-per-node 2 -m bench.parallel [--quick] [--device cpu|cuda] [--out DIR]

One process a GPU over NCCL where as many GPUs are visible, else gloo on the CPU. A step is forward
+ backward to every parameter (no optimizer), the same number of steps in every rank. Back-to-back
time per step and, on a GPU, GPU time (bench.timing: the L2 flushed, the kernels and collectives
alone); medians over interleaved rounds, spreads; rank 0 reports and writes
bench-parallel-<device>-<world>.json.

The block, tokens laid out [sequence, batch, features] (sequence first: sequence parallel shards
the loss's rows): x + down(act(up(norm(x)))) with act(h) = sigmoid(h) * h**2, a norm, an output layer to class scores, the
per-token loss's mean; rms_norm the norms, weighted_square the activation, cross_entropy the loss,
PyTorch's ops for those the tree lacks (tests/ops/parallel_block.py trains it for correctness).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from custom_op import ops

from . import progress, timing

EPS = 1e-6
LAYOUTS = ("tp_sp", "fsdp2")
IMPLS = ("custom_op", "plain PyTorch")


def torch_functions() -> dict[str, Callable]:
    """The block's norm, activation and loss through PyTorch's ops (half logits cast up first, as
    users write the loss)."""
    return {
        "norm": lambda x, w: F.rms_norm(x, x.shape[-1:], w, EPS),
        "activation": lambda h: torch.sigmoid(h) * h * h,
        "loss": lambda logits, labels: F.cross_entropy(logits.float(), labels, reduction="none"),
    }


def tree_functions() -> dict[str, Callable]:
    """The same through the tree's operators where it has them."""
    tree, functions = ops.public_functions(), torch_functions()
    if "rms_norm" in tree:
        functions["norm"] = lambda x, w: tree["rms_norm"](x, w, EPS)
    if "weighted_square" in tree:
        functions["activation"] = lambda h: tree["weighted_square"](h, torch.sigmoid(h))
    if "cross_entropy" in tree:
        functions["loss"] = tree["cross_entropy"]
    return functions


class Layer(torch.nn.Module):
    """function(x, weight) with a learned weight per feature, about `centre`."""

    def __init__(self, function: Callable, features: int, centre: float) -> None:
        super().__init__()
        self.function = function
        self.weight = torch.nn.Parameter(centre + 0.1 * torch.randn(features))

    def forward(self, x):
        return self.function(x, self.weight)


class Block(torch.nn.Module):
    def __init__(self, functions: dict[str, Callable], features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.loss = functions["loss"]
        self.norm = Layer(functions["norm"], features, 1.0)
        self.up = torch.nn.Linear(features, hidden, bias=False)
        self.act = functions["activation"]
        self.down = torch.nn.Linear(hidden, features, bias=False)
        self.final_norm = Layer(functions["norm"], features, 1.0)
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
    return t.tensor_split(count, dim)[index]


def sizes(device: str, quick: bool) -> dict[str, int]:
    """Llama-3-8B's widths and vocabulary on a GPU (8192 tokens a step); small on the CPU and with --quick."""
    if device == "cuda" and not quick:
        return {"sequence": 4096, "batch": 2, "features": 4096, "hidden": 14336, "classes": 128256}
    return {"sequence": 32, "batch": 4, "features": 64, "hidden": 128, "classes": 256}


def prepared(layout: str, functions: dict, size: dict, device: str, dtype: torch.dtype):
    """The block in this rank under `layout`, and its step on the rank's part of a fixed batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    world, rank = dist.get_world_size(), dist.get_rank()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        block = Block(functions, size["features"], size["hidden"], size["classes"]).to(device, dtype)
        x = torch.randn(size["sequence"], size["batch"], size["features"]).to(device, dtype)
        labels = torch.randint(0, size["classes"], (size["sequence"], size["batch"])).to(device)
    if layout == "tp_sp":
        tp_mesh = init_device_mesh(device, (world,), mesh_dim_names=("tp",))
        tensor_parallel(block, tp_mesh)
        x = piece(x, 0, rank, world)
        labels = DTensor.from_local(piece(labels, 0, rank, world), tp_mesh, [Shard(0)])
    else:
        fully_shard(block, mesh=init_device_mesh(device, (world,), mesh_dim_names=("dp",)))
        x, labels = piece(x, 1, rank, world), piece(labels, 1, rank, world)
    parameters = list(block.parameters())

    def step() -> None:
        for p in parameters:
            p.grad = None
        block(x, labels).backward()

    return step


def wall_median_ms(fn: Callable[[], object], warmup: int, reps: int) -> tuple[float, float]:
    """A fixed number of calls, timed one by one (every rank makes the same calls: each has
    collectives)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples), timing.spread(samples)


def agreed_clears(fn: Callable[[], object]) -> int:
    """Every rank's L2 clears before a step, the most any rank needs: a rank with fewer would wait
    for the others inside the step's collectives, and time that wait as its GPU time."""
    clears = torch.tensor([timing.clears_for(fn)], device="cuda")
    dist.all_reduce(clears, op=dist.ReduceOp.MAX)
    return int(clears.item())


def measure(device: str, quick: bool) -> list[dict]:
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    size = sizes(device, quick)
    tokens = size["sequence"] * size["batch"]
    warmup, reps = (2, 5) if quick else (5, 20)
    rounds = 3 if quick else 5
    views: dict[str, Callable] = {"ms": lambda fn: wall_median_ms(fn, warmup, reps)}
    if device == "cuda":
        views = {
            "ms": lambda fn: timing.gpu_median_ms(fn, warmup, reps),
            "gpu_ms": lambda fn: timing.gpu_median_ms(fn, warmup, reps, flush_l2=True, clears=agreed_clears(fn)),
        }
    rows = []
    with progress.Progress("parallel", len(LAYOUTS), quiet=dist.get_rank() != 0) as shown:
        for layout in LAYOUTS:
            shown.step(f"{layout}, {' and '.join(IMPLS)}, {tokens} tokens a step, {rounds} rounds of {reps} steps")
            steps = {
                impl: prepared(layout, functions, size, device, dtype)
                for impl, functions in zip(IMPLS, (tree_functions(), torch_functions()), strict=True)
            }
            timed = {(impl, view): (step, timer) for impl, step in steps.items() for view, timer in views.items()}
            medians = timing.interleaved_medians(timed, lambda pair: pair[1](pair[0]), rounds)
            for impl in IMPLS:
                row = {"layout": layout, "impl": impl, "world": dist.get_world_size(), "tokens": tokens}
                for view in views:
                    ms, spread = medians[impl, view]
                    prefix = "" if view == "ms" else "gpu_"
                    row.update(
                        {view: ms, f"{prefix}spread": round(spread, 4), f"{prefix}tokens_per_s": tokens / ms * 1e3}
                    )
                rows.append(row)
    return rows


def print_table(rows: list[dict], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    gpu = "gpu_ms" in rows[0]
    columns = ["layout", "impl", "tokens/s", "ms", "spread"] + (["GPU tokens/s", "GPU ms", "GPU spread"] if gpu else [])
    for column in columns:
        table.add_column(column, justify="left" if column in ("layout", "impl") else "right")
    for r in rows:
        cells = [r["layout"], r["impl"], f"{r['tokens_per_s']:.0f}", f"{r['ms']:.3f}", f"{100 * r['spread']:.0f}%"]
        if gpu:
            cells += [f"{r['gpu_tokens_per_s']:.0f}", f"{r['gpu_ms']:.3f}", f"{100 * r['gpu_spread']:.0f}%"]
        table.add_row(*cells)
    Console(width=160).print(table)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="torchrun --standalone --nproc-per-node N -m bench.parallel", description=__doc__
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few steps")
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default=None, help="default: cuda when each rank has a GPU"
    )
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    args = parser.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "0"))
    if world < 2:
        parser.error(
            "run it with torchrun, two processes or more: torchrun --standalone --nproc-per-node 2 -m bench.parallel"
        )
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))  # this host's processes: one GPU each
    device = args.device or ("cuda" if torch.cuda.device_count() >= local else "cpu")
    if device == "cuda":
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    else:
        torch.set_num_threads(1)  # the ranks share the machine's cores
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    try:
        rows = measure(device, args.quick)
        if dist.get_rank() == 0:
            from .report import context

            ctx = context(device, 0.0, args.quick)
            ctx.pop("copy_gbps")
            args.out.mkdir(parents=True, exist_ok=True)
            path = args.out / f"bench-parallel-{device}-{world}.json"
            path.write_text(json.dumps({"context": ctx, "rows": rows}, indent=1) + "\n")
            print_table(rows, f"{ctx['device']} x {world} - torch {ctx['torch']} - {rows[0]['tokens']} tokens a step")
            print(f"wrote {path}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
