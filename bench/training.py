"""A training step of each operator whose spec declares `training` (custom_op.testing.TrainingCase):
the small model the op takes part in, forward + backward to every parameter's gradient, against the
same model through PyTorch's ops, in eager and under torch.compile(fullgraph=True). bfloat16 on the
GPU, float32 on the CPU; on a GPU also each step's peak memory."""

from __future__ import annotations

import torch

from . import cases, progress, timing


def specs() -> list:
    """The operators that take part: those whose spec declares a training model."""
    return [spec for spec in cases.SPECS.values() if spec.training is not None]


def models(spec, device: str, dtype: torch.dtype, quick: bool):
    """The op's training case: {"custom_op": model, "plain PyTorch": model}, the batch and its label."""
    case = spec.training_case(device, dtype, quick)
    return {"custom_op": case.custom, "plain PyTorch": case.plain}, case.batch, case.label


def step(model: torch.nn.Module, batch: tuple) -> tuple[torch.Tensor, ...]:
    """Forward to the loss, and the gradient of every parameter and of each batch tensor that
    requires grad (the hidden states a model's lower layers would take it back through)."""
    loss = model(*batch)
    wanted = [p for p in model.parameters() if p.requires_grad]
    wanted += [t for t in batch if isinstance(t, torch.Tensor) and t.requires_grad]
    return torch.autograd.grad(loss, wanted)


def peak_gib(model: torch.nn.Module, batch: tuple) -> float:
    """This model's peak during one step, GiB: its parameters and batch, and the most the CUDA
    allocator held above what was allocated before the step (the other models stay resident and
    are not counted)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step(model, batch)
    torch.cuda.synchronize()
    tensors = [*model.parameters(), *(t for t in batch if isinstance(t, torch.Tensor))]
    own = sum(t.numel() * t.element_size() for t in tensors)
    return round((torch.cuda.max_memory_allocated() - before + own) / 2**30, 3)


def measure(device: str, quick: bool, ops: list[str] | None = None) -> list[dict]:
    """Each op's models eager and compiled, timed in interleaved rounds (timing.interleaved_medians)."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    reps = (3, 10) if quick else (10, 50)
    rows = []
    chosen = [spec for spec in specs() if not ops or spec.name in ops]
    with progress.Progress("training", 2 * len(chosen)) as shown:
        for spec in chosen:
            rows += _op(spec, device, dtype, quick, reps, shown)
    return rows


def _op(
    spec, device: str, dtype: torch.dtype, quick: bool, reps: tuple[int, int], shown: progress.Progress
) -> list[dict]:
    """One op's models, compiled (a step of the progress) then timed (another)."""
    rows = []
    made, batch, label = models(spec, device, dtype, quick)
    case = f"training step {spec.name} {str(dtype).removeprefix('torch.')} {label}"
    shown.step(f"{case.removeprefix('training step ')}: compiling")
    torch._dynamo.reset()
    runs = {}
    for name, model in made.items():
        runs[name] = model
        runs[f"{name} compiled"] = torch.compile(model, fullgraph=True)
    for run in runs.values():
        step(run, batch)  # compiled here, outside the timing
    peaks = {impl: peak_gib(run, batch) for impl, run in runs.items()} if device == "cuda" else {}
    shown.step(f"{case.removeprefix('training step ')}: timing")
    views = {"ms": lambda fn: timing.median_ms(device, fn, quick)}
    if device == "cuda":  # the step's kernels alone (back to back, the host's time can dominate)
        views["gpu_ms"] = lambda fn: timing.gpu_median_ms(fn, *reps, flush_l2=True)
    timed = {
        (impl, view): lambda run=run, timer=timer, batch=batch: timer(lambda: step(run, batch))
        for impl, run in runs.items()
        for view, timer in views.items()
    }
    rounds = 3 if quick or device == "cpu" else 5  # the CPU's step is tens of ms: 3 rounds of 0.5 s each
    medians = timing.interleaved_medians(timed, lambda time_it: time_it(), rounds)
    for impl in runs:
        row = {"case": case, "op": spec.name, "impl": impl}
        for view in views:
            spread_field = "spread" if view == "ms" else "gpu_spread"
            ms, spread = medians[impl, view]
            row.update({view: ms, spread_field: round(spread, 4)})
        if impl in peaks:
            row["peak_gib"] = peaks[impl]
        rows.append(row)
    return rows
