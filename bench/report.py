"""Outputs of a run: terminal table, JSON with the context, Markdown, PNG plot, baseline check."""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import subprocess
from pathlib import Path

import torch

from . import host_cost, load


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def library_sha256() -> str | None:
    """The first 12 hex digits of the SHA-256 of the measured libraries (those loaded, in order): which
    build ran, also where the checkout's history does not say (a copy of the tree with an older .git, a
    carried build)."""
    import custom_op

    if not custom_op.LIBRARY_PATHS:
        return None
    digest = hashlib.sha256()
    for path in custom_op.LIBRARY_PATHS:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:12]


def context(device: str, copy_gbps: float, quick: bool) -> dict:
    revision = _git("rev-parse", "--short", "HEAD") or "unknown"
    changes = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "device": torch.cuda.get_device_name() if device == "cuda" else (platform.processor() or platform.machine()),
        "device_kind": device,
        "cpu_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "git_revision": revision,
        "git_dirty": None if changes is None else bool(changes),  # tracked files differ from the revision
        "library_sha256": library_sha256(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "copy_gbps": round(copy_gbps, 1),
        "quick": quick,
    }


# Why a CPU case can pass 100% of copy, said where the figures are.
CPU_ABOVE_COPY = (
    " On a CPU a case can pass 100% of copy: its data may fit in the last-level cache, and a write costs a"
    " read first (write-allocate), which weighs more on a copy than on a kernel that reads more than it writes."
)

# Where an op's spec names no baseline: nothing a PyTorch user would call instead was timed.
NO_BASELINE = "no baseline"


def with_speedups(rows: list[dict]) -> list[dict]:
    """Adds, to each custom_op row, its speedup over the other implementations of the same case."""
    for impls in _by_case(rows).values():
        mine = impls.get("custom_op")
        if mine:
            others = {name: r for name, r in impls.items() if not name.startswith("custom_op")}
            mine["speedup"] = {name: round(r["ms"] / mine["ms"], 3) for name, r in others.items()}
            if "gpu_ms" in mine:
                mine["speedup_gpu"] = {name: round(r["gpu_ms"] / mine["gpu_ms"], 3) for name, r in others.items()}
    return rows


def markdown(ctx: dict, rows: list[dict], extras: dict | None = None) -> str:
    extras = extras or {}
    gpu_view = any("gpu_ms" in r for r in rows)
    lines = [f"> **Warning:** {line}" for line in ctx.get("warnings", [])]
    lines += [""] if lines else []
    lines += [
        f"Device: {ctx['device']}; torch {ctx['torch']} (CUDA {ctx['cuda']}); revision {ctx['git_revision']}"
        + (" with local changes" if ctx.get("git_dirty") else "")
        + (f", library sha256 {ctx['library_sha256']}" if ctx.get("library_sha256") else "")
        + "; "
        f"{ctx['date']}; copy bandwidth {ctx['copy_gbps']:.0f} GB/s (read + write, measured in this run)."
        + (f" Medians of {ctx['runs']} runs, each in its own process." if ctx.get("runs", 1) > 1 else "")
        + (" glibc kept freed memory (--keep-heap)." if ctx.get("keep_heap") else "")
        + (CPU_ABOVE_COPY if ctx.get("device_kind") == "cpu" else "")
        + (
            f" Timed alone, {NO_BASELINE} in their OpSpec: {', '.join(ctx['without_baseline'])}."
            if ctx.get("without_baseline")
            else ""
        ),
    ]
    if rows:
        lines += [
            "",
            "Back-to-back calls (ms, host time included where it exceeds the GPU's)"
            + ("; GPU time with the L2 flushed between calls (GPU ms, the kernels alone)." if gpu_view else ".")
            + " eager and torch.compile: each op's baseline (its OpSpec's, what PyTorch users would call"
            " instead), eager and compiled for the case's shape.",
            "",
            "| case | custom_op ms | GB/s | % of copy | vs eager | vs torch.compile | eager ms | torch.compile ms |"
            + (" GPU ms | GPU % of copy | vs torch.compile, GPU time |" if gpu_view else ""),
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |" if gpu_view else ""),
        ]
    for case, impls in _by_case(rows).items():
        mine = impls.get("custom_op")
        if not mine:
            continue
        line = f"| {case} | {_ms(mine)} | {mine['gbps']:.0f} | {mine['pct_copy']:.1f} | "
        if "eager" in impls:
            eager, comp = impls["eager"], impls["torch.compile"]
            line += (
                f"{mine['speedup']['eager']:.2f}x | {mine['speedup']['torch.compile']:.2f}x | "
                f"{_ms(eager)} | {_ms(comp)} |"
            )
        else:
            line += f"{NO_BASELINE} | {NO_BASELINE} | | |"
        if gpu_view:
            gpu_vs_compile = mine.get("speedup_gpu", {}).get("torch.compile")
            vs = NO_BASELINE if gpu_vs_compile is None else f"{gpu_vs_compile:.2f}x"
            line += f" {_ms(mine, 'gpu_ms', 'gpu_spread')} | {mine['gpu_pct_copy']:.1f} | {vs} |"
        lines.append(line)
    variants = [r for r in rows if r["impl"].startswith("custom_op")]
    with_variants = {r["case"] for r in variants if r["impl"] != "custom_op"}
    if with_variants:
        lines += [
            "",
            "Other ways to call an op (out=, in place: no new output)"
            + (" (new MB: device memory each call allocates)" if ctx["device_kind"] == "cuda" else "")
            + ":",
            "",
            "| case | impl | ms | GB/s | new MB |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        for r in variants:
            if r["case"] in with_variants:
                extra = "n/a" if r.get("extra_mb") is None else f"{r['extra_mb']:.0f}"
                lines.append(f"| {r['case']} | {r['impl']} | {r['ms']:.4f} | {r['gbps']:.0f} | {extra} |")
    lines += other_libraries_markdown(rows)
    lines += host_time_markdown(extras.get("host_time", [])) + training_markdown(extras.get("training", []))
    return "\n".join(lines) + "\n"


def _ms(row: dict, field: str = "ms", spread: str = "spread") -> str:
    """A time, marked where its spread is above the bound (load.SPREAD_BOUND)."""
    return f"{row[field]:.4f}" + (f" {load.MARK}" if load.noisy(row.get(spread)) else "")


def other_libraries_markdown(rows: list[dict]) -> list[str]:
    """Other libraries' kernels for an op (its OpSpec.other_libraries, where installed)."""
    ours = ("eager", "torch.compile")
    others = [r for r in rows if not r["impl"].startswith("custom_op") and r["impl"] not in ours]
    if not others:
        return []
    mine = {r["case"]: r for r in rows if r["impl"] == "custom_op"}
    gpu = "gpu_ms" in others[0]
    lines = [
        "",
        "Other libraries' kernels for the same op (where installed): custom_op's speedup over each"
        + (", back to back and in GPU time." if gpu else "."),
        "",
        "| case | impl | ms | GB/s | % of copy | custom_op vs it |"
        + (" GPU ms | GPU % of copy | vs it, GPU time |" if gpu else ""),
        "| --- | --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |" if gpu else ""),
    ]
    for r in others:
        me = mine[r["case"]]
        line = f"| {r['case']} | {r['impl']} | {r['ms']:.4f} | {r['gbps']:.0f} | {r['pct_copy']:.1f} | {me['speedup'][r['impl']]:.2f}x |"
        if gpu:
            line += f" {r['gpu_ms']:.4f} | {r['gpu_pct_copy']:.1f} | {me['speedup_gpu'][r['impl']]:.2f}x |"
        lines.append(line)
    return lines


def _by_case(rows: list[dict]) -> dict[str, dict[str, dict]]:
    by_case: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_case.setdefault(row["case"], {})[row["impl"]] = row
    return by_case


def host_time_markdown(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "Host time per call (us), a tiny input: what the host spends issuing one call; eager / custom_op "
        ">= 1.00x means the op costs no more host time than eager PyTorch.",
        "",
        "| case | custom_op us | eager us | eager / custom_op | spread |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for case, impls in _by_case(rows).items():
        mine, eager = impls["custom_op"], impls.get("eager")
        if eager is None:
            lines.append(f"| {case} | {mine['us']:.1f} | | {NO_BASELINE} | {load.mark(mine['spread'])} |")
            continue
        spread = max(mine["spread"], eager["spread"])
        lines.append(
            f"| {case} | {mine['us']:.1f} | {eager['us']:.1f} | {eager['us'] / mine['us']:.2f}x | {load.mark(spread)} |"
        )
    note = host_cost.note(rows)
    return lines + (["", note] if note else [])


def training_markdown(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "Training step (ms): forward + backward to every parameter's gradient of a small model through each "
        "operator's layers, against the same model through its baseline in plain PyTorch (speedup >= 1.00x: the op's model is as fast or faster); "
        "on a GPU in both views: back-to-back steps, and GPU time (the step's kernels alone, L2 flushed). "
        "Medians of interleaved rounds, spreads in parentheses. Peak memory: a step's peak in the CUDA allocator "
        "above what it held before, plus the model's parameters and batch; its ratio plain PyTorch / custom_op.",
        "",
        "| case | view | custom_op | plain PyTorch | speedup | custom_op compiled | plain PyTorch compiled | speedup |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case, impls in _by_case(rows).items():
        views = [("back-to-back", "ms", "spread")]
        if "gpu_ms" in impls["custom_op"]:
            views.append(("GPU time", "gpu_ms", "gpu_spread"))
        for view, field, spread in views:
            cells = {impl: f"{impls[impl][field]:.3f} ({load.mark(impls[impl][spread])})" for impl in impls}
            mine, plain = impls["custom_op"][field], impls["plain PyTorch"][field]
            mine_compiled, plain_compiled = impls["custom_op compiled"][field], impls["plain PyTorch compiled"][field]
            lines.append(
                f"| {case} | {view} | {cells['custom_op']} | {cells['plain PyTorch']} | {plain / mine:.2f}x | "
                f"{cells['custom_op compiled']} | {cells['plain PyTorch compiled']} | {plain_compiled / mine_compiled:.2f}x |"
            )
        if "peak_gib" in impls["custom_op"]:
            gib = {impl: impls[impl]["peak_gib"] for impl in impls}
            lines.append(
                f"| {case} | peak memory GiB | {gib['custom_op']:.2f} | {gib['plain PyTorch']:.2f} | "
                f"{gib['plain PyTorch'] / gib['custom_op']:.2f}x | {gib['custom_op compiled']:.2f} | "
                f"{gib['plain PyTorch compiled']:.2f} | {gib['plain PyTorch compiled'] / gib['custom_op compiled']:.2f}x |"
            )
    return lines


def terminal_table(ctx: dict, rows: list[dict], extras: dict | None = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    extras = extras or {}
    console = Console(width=160)
    for line in ctx.get("warnings", []):
        console.print(Text.assemble(("WARNING", "bold yellow"), " ", line))
    for part in ("host_time", "training"):
        if extras.get(part):
            unit = "us" if part == "host_time" else "ms"
            table = Table(title=part.replace("_", " "))
            gpu_view = "gpu_ms" in extras[part][0]
            peak = "peak_gib" in extras[part][0]
            columns = ("case", "impl", unit, "spread") + (("GPU ms", "GPU spread") if gpu_view else ())
            for column in columns + (("peak GiB",) if peak else ()):
                table.add_column(column, justify="left" if column in ("case", "impl") else "right")
            for row in extras[part]:
                cells = [row["case"], row["impl"], f"{row[unit]:.3f}", load.mark(row["spread"])]
                if gpu_view:
                    cells += [f"{row['gpu_ms']:.3f}", load.mark(row["gpu_spread"])]
                if peak:
                    cells.append(f"{row['peak_gib']:.2f}")
                table.add_row(*cells)
            console.print(table)
            note = host_cost.note(extras[part]) if part == "host_time" else None
            if note:
                console.print(Text(note))
    if not rows:
        return

    table = Table(
        title=f"{ctx['device']} - copy {ctx['copy_gbps']:.0f} GB/s - torch {ctx['torch']}",
        caption="eager, torch.compile: the op's baseline (OpSpec.baseline), eager and compiled",
    )
    for column in ("case", "impl", "ms", "spread", "GB/s", "% copy", "new MB", "speedup"):
        table.add_column(column, justify="left" if column in ("case", "impl") else "right")
    for row in rows:
        speedup = ", ".join(f"{k} {v:.2f}x" for k, v in row.get("speedup", {}).items())
        if row["impl"] == "custom_op" and not any(k in row.get("speedup", {}) for k in ("eager", "torch.compile")):
            speedup = ", ".join(filter(None, (speedup, NO_BASELINE)))
        extra = "" if row.get("extra_mb") is None else f"{row['extra_mb']:.0f}"
        table.add_row(
            row["case"], row["impl"], f"{row['ms']:.4f}", load.mark(row.get("spread")), f"{row['gbps']:.0f}",
            f"{row['pct_copy']:.1f}", extra, speedup,
        )  # fmt: skip
    console.print(table)


def plot(ctx: dict, rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["op"], row["mode"], row["dtype"]), []).append(row)
    keys = sorted(groups)
    impl_names = sorted({row["impl"] for row in rows})
    colors = {name: f"C{i}" for i, name in enumerate(impl_names)}  # one color per implementation
    cols = min(3, len(keys))
    nrows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.5 * cols, 3.8 * nrows), squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        impls: dict[str, list[tuple[int, float]]] = {}
        for row in groups[key]:
            impls.setdefault(row["impl"], []).append((row["numel"], row["gbps"]))
        for impl, points in sorted(impls.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=impl, color=colors[impl])
        ax.axhline(ctx["copy_gbps"], color="black", linestyle="--", linewidth=1, label="copy (ceiling)")
        ax.set_xscale("log", base=2)
        ax.set_title(" ".join(key), fontsize=10)
        ax.set_xlabel("elements of x")
        ax.set_ylabel("GB/s")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    handles = [plt.Line2D([], [], color=colors[n], marker="o", label=n) for n in impl_names]
    handles.append(plt.Line2D([], [], color="black", linestyle="--", label="copy (ceiling)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    fig.suptitle(f"{ctx['device']}, torch {ctx['torch']}, {ctx['date'][:10]}: GB/s of the bytes that must move")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def compare_to_baseline(rows: list[dict], baseline_path: Path, min_tolerance: float = 0.10) -> list[str]:
    """custom_op rows slower than the baseline by more than run-to-run noise (at least 10%). Where
    both runs have the GPU-time view, that view is compared: back-to-back times of small cases
    follow the host's speed, which differs between machines of one kind."""
    baseline = json.loads(baseline_path.read_text())
    old = {(r["case"], r["impl"]): r for r in baseline["rows"]}
    regressions, compared = [], 0
    for row in rows:
        before = old.get((row["case"], row["impl"]))
        if row["impl"] != "custom_op" or before is None:
            continue
        compared += 1
        gpu_view = "gpu_ms" in row and "gpu_ms" in before
        field, spread, view = ("gpu_ms", "gpu_spread", " GPU time") if gpu_view else ("ms", "spread", "")
        tolerance = max(min_tolerance, 2 * row.get(spread, 0.0), 2 * before.get(spread, 0.0))
        if row[field] > before[field] * (1 + tolerance):
            regressions.append(
                f"{row['case']}: {row[field]:.4f} ms{view} vs baseline {before[field]:.4f} ms "
                f"(+{100 * (row[field] / before[field] - 1):.0f}%, tolerance {100 * tolerance:.0f}%)"
            )
    if rows and not compared:  # another machine kind's baseline, or --quick against a full run
        regressions.append(f"no custom_op case of this run is in {baseline_path}: nothing was compared")
    return regressions


def write(out_dir: Path, ctx: dict, rows: list[dict], extras: dict | None = None) -> dict[str, Path]:
    extras = extras or {}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"bench-{ctx['device_kind']}" + "".join(f"-{d}" for d in ctx.get("dtypes", []))
    paths = {"json": out_dir / f"{stem}.json", "markdown": out_dir / f"{stem}.md"}
    paths["json"].write_text(json.dumps({"context": ctx, "rows": rows, **extras}, indent=1))
    paths["markdown"].write_text(markdown(ctx, rows, extras))
    if rows:  # the plot is of the matrix
        paths["png"] = out_dir / f"{stem}.png"
        plot(ctx, rows, paths["png"])
    return paths
