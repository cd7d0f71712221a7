"""A training step through both operators: a small model of RMSNorm-like layers (the mean of
squares by weighted_sum_of_squares with w = 1/features) each followed by a projection and a
weighted square, forward + backward to every parameter's gradient; against the same model in
plain PyTorch (the operators' references), in eager and under torch.compile(fullgraph=True).
bfloat16 on the GPU, float32 on the CPU."""

from __future__ import annotations

import torch

from . import cases, timing

EPS = 1e-6


class Model(torch.nn.Module):
    def __init__(self, features: int, layers: int, square, sum_of_squares) -> None:
        super().__init__()
        self.square, self.sum_of_squares = square, sum_of_squares
        self.register_buffer("mean_weight", torch.full((features,), 1.0 / features))
        self.gains = torch.nn.ParameterList(torch.nn.Parameter(torch.ones(features)) for _ in range(layers))
        self.projections = torch.nn.ModuleList(torch.nn.Linear(features, features, bias=False) for _ in range(layers))
        self.square_weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.full((features,), 0.5)) for _ in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for gain, projection, weight in zip(self.gains, self.projections, self.square_weights, strict=True):
            mean_square = self.sum_of_squares(x, self.mean_weight)
            x = x * torch.rsqrt(mean_square + EPS).unsqueeze(-1) * gain
            x = x + self.square(projection(x), weight)
        return x


def models(features: int, layers: int, dtype: torch.dtype, device: str) -> dict[str, Model]:
    """The model through the operators and in plain PyTorch, with the same parameters."""
    torch.manual_seed(0)
    functions = {
        "custom_op": (cases.SPECS["weighted_square"].function, cases.SPECS["weighted_sum_of_squares"].function),
        "plain PyTorch": (cases.SPECS["weighted_square"].reference, cases.SPECS["weighted_sum_of_squares"].reference),
    }
    made = {name: Model(features, layers, *pair) for name, pair in functions.items()}
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


def measure(device: str, quick: bool) -> list[dict]:
    """Each model eager and compiled, timed in interleaved rounds (timing.interleaved_medians)."""
    tokens, features, layers = shape(device, quick)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(tokens, features, device=device, dtype=dtype)
    case = f"training step {str(dtype).removeprefix('torch.')} {tokens}x{features}, {layers} layers"
    runs = {}
    for name, model in models(features, layers, dtype, device).items():
        runs[name] = model
        runs[f"{name} compiled"] = torch.compile(model, fullgraph=True)
    for run in runs.values():
        step(run, x)  # compiled here, outside the timing
    views = {"ms": lambda fn: timing.median_ms(device, fn, quick)}
    if device == "cuda":  # the step's kernels alone (back to back, the host's time can dominate)
        reps = (3, 10) if quick else (10, 50)
        views["gpu_ms"] = lambda fn: timing.gpu_median_ms(fn, *reps, flush_l2=True)
    timed = {
        (impl, view): lambda run=run, timer=timer: timer(lambda: step(run, x))
        for impl, run in runs.items()
        for view, timer in views.items()
    }
    medians = timing.interleaved_medians(timed, lambda time_it: time_it(), 3 if quick else 5)
    rows = []
    for impl in runs:
        row = {"case": case, "impl": impl}
        for view in views:
            spread_field = "spread" if view == "ms" else "gpu_spread"
            ms, spread = medians[impl, view]
            row.update({view: ms, spread_field: round(spread, 4)})
        rows.append(row)
    return rows
