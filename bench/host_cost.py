"""What a user pays for where an op's call costs the host more than eager PyTorch's, when it matters
and what to do: the report's note under its host-time table (and each op page's, docs/ops)."""

from __future__ import annotations

PAID_FOR = (
    "the Python call (custom_op's function, torch.ops' dispatch and the wrapper that turns C++ errors "
    "into ValueError), the kernel's argument checks (dtypes, devices, shapes), the stable ABI's boxed "
    "call (every argument and result passed through a C shim, each size, stride and data pointer read "
    "through another), the output's allocation through the shim and, with grad, the op's autograd in "
    "Python (register_autograd), where eager's runs in C++"
)
MATTERS = (
    "where a call's work takes less time than issuing it: small tensors, and decoding (a token a step), "
    "where a model makes many such calls; at large sizes the kernels' time hides it"
)
TO_DO = (
    "on a GPU, capture the step in a CUDA graph (torch.cuda.CUDAGraph, torch.cuda.graphs) or compile it "
    'with torch.compile(mode="reduce-overhead"), which replays the kernels without the per-call host '
    "work; on the CPU, give each call more work (larger batches)"
)


def above_eager(rows: list[dict]) -> list[tuple[str, float, float]]:
    """(case, custom_op us, eager us) of each host-time case whose call costs more than eager's."""
    by_case: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_case.setdefault(row["case"], {})[row["impl"]] = row
    return [
        (case, impls["custom_op"]["us"], impls["eager"]["us"])
        for case, impls in by_case.items()
        if "custom_op" in impls and "eager" in impls and impls["custom_op"]["us"] > impls["eager"]["us"]
    ]


def note(rows: list[dict]) -> str | None:
    """One paragraph for the report, where a host-time case costs more than eager's."""
    above = above_eager(rows)
    if not above:
        return None
    cases = ", ".join(f"{case} {mine:.1f} us against eager's {eager:.1f}" for case, mine, eager in above)
    return f"Host time above eager's ({cases}): a call pays for {PAID_FOR}. It matters {MATTERS}. What to do: {TO_DO}."
