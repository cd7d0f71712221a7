"""A training step through each operator that gives its spec's `training_layers`: a small model
of residual blocks, x = x + projection(layer(x)), forward + backward to every parameter's
gradient; against the same model through the op's baseline (plain PyTorch), in eager and under
torch.compile(fullgraph=True). bfloat16 on the GPU, float32 on the CPU."""

from __future__ import annotations

import torch

from . import cases, timing


class Model(torch.nn.Module):
    def __init__(self, layers: list[torch.nn.Module], features: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)
        self.projections = torch.nn.ModuleList(torch.nn.Linear(features, features, bias=False) for _ in layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer, projection in zip(self.layers, self.projections, strict=True):
            x = x + projection(layer(x))
        return x


def specs() -> list:
    """The operators that take part: those whose spec gives training_layers."""
    return [spec for spec in cases.SPECS.values() if spec.training_layers is not None]


def models(spec, features: int, layers: int, dtype: torch.dtype, device: str) -> dict[str, Model]:
    """The model through the op and through its baseline, with the same parameters."""
    torch.manual_seed(0)
    pairs = [spec.training_layers(features) for _ in range(layers)]
    made = {
        "custom_op": Model([p[0] for p in pairs], features),
        "plain PyTorch": Model([p[1] for p in pairs], features),
    }
    made["plain PyTorch"].load_state_dict(made["custom_op"].state_dict())
    return {name: model.to(device=device, dtype=dtype) for name, model in made.items()}


def step(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Forward, a loss, and the gradient of every parameter."""
    loss = model(x).float().square().mean()
    return torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad])


def shape(device: str, quick: bool) -> tuple[int, int, int]:
    """(tokens, features, layers): small enough that host time matters, as in many layers."""
    if device == "cuda":
        return (1024, 512, 4) if quick else (4096, 1024, 4)
    return (64, 256, 4)


def measure(device: str, quick: bool, ops: list[str] | None = None) -> list[dict]:
    """Each op's models eager and compiled, timed in interleaved rounds (timing.interleaved_medians)."""
    tokens, features, layers = shape(device, quick)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(tokens, features, device=device, dtype=dtype)
    reps = (3, 10) if quick else (10, 50)
    rows = []
    for spec in specs():
        if ops and spec.name not in ops:
            continue
        case = f"training step {spec.name} {str(dtype).removeprefix('torch.')} {tokens}x{features}, {layers} layers"
        torch._dynamo.reset()
        runs = {}
        for name, model in models(spec, features, layers, dtype, device).items():
            runs[name] = model
            runs[f"{name} compiled"] = torch.compile(model, fullgraph=True)
        for run in runs.values():
            step(run, x)  # compiled here, outside the timing
        views = {"ms": lambda fn: timing.median_ms(device, fn, quick)}
        if device == "cuda":  # the step's kernels alone (back to back, the host's time can dominate)
            views["gpu_ms"] = lambda fn: timing.gpu_median_ms(fn, *reps, flush_l2=True)
        timed = {
            (impl, view): lambda run=run, timer=timer: timer(lambda: step(run, x))
            for impl, run in runs.items()
            for view, timer in views.items()
        }
        medians = timing.interleaved_medians(timed, lambda time_it: time_it(), 3 if quick else 5)
        for impl in runs:
            row = {"case": case, "op": spec.name, "impl": impl}
            for view in views:
                spread_field = "spread" if view == "ms" else "gpu_spread"
                ms, spread = medians[impl, view]
                row.update({view: ms, spread_field: round(spread, 4)})
            rows.append(row)
    return rows
