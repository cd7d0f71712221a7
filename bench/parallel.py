"""A transformer block of the tree's operators trained under tensor + sequence parallel and under
FSDP2, through the tree's operators and through PyTorch's own, as tokens per second:

    torchrun --standalone --nproc-per-node 2 -m bench.parallel [--quick] [--device cpu|cuda] [--out DIR]

One process a GPU over NCCL where as many GPUs are visible, else gloo on the CPU. A step is forward
+ backward to every parameter (no optimizer), the same number of steps in every rank. Back-to-back
time per step and, on a GPU, GPU time (bench.timing: the L2 flushed, the kernels and collectives
alone); medians over interleaved rounds, spreads; rank 0 reports and writes
bench-parallel-<device>-<world>.json.

The block is custom_op/testing_block.py's (test_parallel_training.py trains it for correctness):
each role (norm, activation, loss) through the op whose spec declares it (OpSpec.block) against the
same through that op's baseline; PyTorch's layer in a role no op takes, in both.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Shard

from custom_op import ops
from custom_op.testing_block import Block, layers, piece, takers, tensor_parallel

from . import progress, timing

LAYOUTS = ("tp_sp", "fsdp2")
IMPLS = ("custom_op", "plain PyTorch")


def impl_layers() -> dict[str, dict]:
    """Each implementation's layers: the declaring ops', and their baselines' (PyTorch's ops)."""
    specs = ops.specs()
    return dict(zip(IMPLS, (layers(specs), layers(specs, through="baseline")), strict=True))


def sizes(device: str, quick: bool) -> dict[str, int]:
    """Llama-3-8B's widths and vocabulary on a GPU (8192 tokens a step); small on the CPU and with --quick."""
    if device == "cuda" and not quick:
        return {"sequence": 4096, "batch": 2, "features": 4096, "hidden": 14336, "classes": 128256}
    return {"sequence": 32, "batch": 4, "features": 64, "hidden": 128, "classes": 256}


def prepared(layout: str, chosen: dict, size: dict, device: str, dtype: torch.dtype):
    """The block in this rank under `layout`, and its step on the rank's part of a fixed batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    world, rank = dist.get_world_size(), dist.get_rank()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        block = Block(chosen, size["features"], size["hidden"], size["classes"]).to(device, dtype)
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
            steps = {impl: prepared(layout, chosen, size, device, dtype) for impl, chosen in impl_layers().items()}
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
            roles = {role: spec.name for role, spec in takers(ops.specs()).items()}
            path.write_text(json.dumps({"context": ctx, "roles": roles, "rows": rows}, indent=1) + "\n")
            # Without an op in any role (OpSpec.block) both rows time PyTorch's layers: the title says so.
            ours = (
                ", ".join(f"{role} {name}" for role, name in roles.items())
                or "none (no OpSpec.block): PyTorch's in both"
            )
            title = f"{ctx['device']} x {world} - torch {ctx['torch']} - {rows[0]['tokens']} tokens a step - the ops: {ours}"
            print_table(rows, title)
            print(f"wrote {path}")
        # The models' pending gloo work holds tensors: freed while the interpreter is whole, not at its
        # teardown, where a gloo thread releasing them aborts the rank (SIGABRT, on a busy machine).
        gc.collect()
        dist.barrier()  # the ranks tear gloo down together: one that does it while another still works can abort
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
