"""python -m bench [--quick] [--device cpu|cuda] [--part matrix|host-time|training] [--mode MODE] [--out DIR]
[--baseline FILE] [--runs N] [--keep-heap]"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from . import cases, combine, heap, host_time, load, progress, report, timing, training

# The kernels over sizes and dtypes; host time per call on a tiny input; a small model's training step.
PARTS = ("matrix", "host-time", "training")
ROUNDS = 5  # interleaved rounds per case of the matrix

REPO_ROOT = Path(__file__).resolve().parent.parent


def measure(args: argparse.Namespace) -> tuple[dict, list[dict]]:
    """One run in this process: (context, rows)."""
    if args.keep_heap:
        heap.keep_heap()

    torch.manual_seed(0)
    torch._dynamo.config.recompile_limit = 64
    device = args.device
    copy = timing.copy_bandwidth_gbps(device, args.quick)
    ctx = report.context(device, copy, args.quick)
    ctx["dtypes"] = sorted(args.dtype or [])
    ctx["keep_heap"] = args.keep_heap
    ctx["without_baseline"] = cases.without_baseline()  # timed alone: their specs name no baseline
    rows = []
    if "matrix" not in args.part:
        return ctx, rows
    todo = [
        c
        for c in cases.all_cases(device, args.quick, args.mode)
        if (not args.dtype or c.dtype_name in args.dtype) and (not args.op or c.op in args.op)
    ]
    with progress.Progress("matrix", len(todo)) as shown:
        for case in todo:
            shown.step(case.label)
            sample = case.sample(device)
            impls = cases.implementations(case, sample)
            runs = {name: cases.runner(case, impl, sample) for name, impl in impls.items()}
            # Back to back, the implementations in interleaved rounds: a drift of the host (which
            # bounds the small cases) falls on all of them alike.
            timed = timing.interleaved_medians(
                runs, lambda run: timing.median_ms(device, run, args.quick, ROUNDS), ROUNDS
            )
            for name, run in runs.items():
                ms, spread = timed[name]
                extra_mb = timing.peak_extra_mb(device, run)
                gbps = case.bytes_moved() / ms / 1e6
                row = {
                    "case": case.label, "op": case.op, "mode": case.mode, "dtype": case.dtype_name,
                    "shape": list(case.shape), "numel": case.numel, "impl": name, "ms": ms,
                    "spread": round(spread, 4), "gbps": gbps, "pct_copy": 100 * gbps / copy,
                    "extra_mb": extra_mb,
                }  # fmt: skip
                if device == "cuda":  # the second view: GPU time, L2 flushed between calls
                    reps = (3, 10) if args.quick else (10, 50)
                    gpu_ms, gpu_spread = timing.gpu_median_ms(run, *reps, flush_l2=True)
                    row.update(gpu_ms=gpu_ms, gpu_spread=round(gpu_spread, 4),
                               gpu_pct_copy=100 * case.bytes_moved() / gpu_ms / 1e6 / copy)  # fmt: skip
                rows.append(row)
            del runs
            del sample
            if device == "cuda":
                torch.cuda.empty_cache()
    return ctx, rows


def several_runs(args: argparse.Namespace) -> tuple[dict, list[dict], dict]:
    """args.runs runs, each a `python -m bench` of its own, combined into medians."""
    child = (
        ["--device", args.device] + (["--quick"] if args.quick else []) + (["--keep-heap"] if args.keep_heap else [])
    )
    child += [a for d in args.dtype or [] for a in ("--dtype", d)] + [a for o in args.op or [] for a in ("--op", o)]
    child += [a for part in sorted(args.part) for a in ("--part", part)]
    child += [a for mode in args.mode for a in ("--mode", mode)]
    results = []
    for i in range(args.runs):
        run_dir = args.out.resolve() / f"run-{i + 1}"  # the runs start in the repository root
        shutil.rmtree(run_dir, ignore_errors=True)  # an earlier run's files would join the medians
        command = [sys.executable, "-m", "bench", *child, "--out", str(run_dir)]
        output = []
        with subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as run:
            for line in run.stdout:  # the run's progress lines passed on as they come, the rest kept
                output.append(line)
                if line.startswith(progress.PREFIX):
                    said = line.removeprefix(progress.PREFIX)
                    print(f"{progress.PREFIX} run {i + 1}/{args.runs}:{said}", end="", flush=True)
        if run.returncode != 0:
            raise SystemExit(f"bench: run {i + 1} of {args.runs} failed:\n{''.join(output)}")
        results += [json.loads(p.read_text()) for p in sorted(run_dir.glob("bench-*.json"))]
        print(f"run {i + 1}/{args.runs} done: {run_dir}")
    return *combine.combine(results), combine.extras(results)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few small cases (CI)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=Path("build/bench"), help="folder for JSON, Markdown and PNG")
    parser.add_argument("--baseline", type=Path, help="a previous JSON to flag regressions against")
    parser.add_argument("--dtype", action="append", help="only these dtypes (float32, bfloat16, float16)")
    parser.add_argument("--op", action="append", choices=cases.OPS, help="only these operators")
    parser.add_argument("--runs", type=int, default=1, help="N runs, each in a new process: medians")
    parser.add_argument(
        "--part", action="append", choices=PARTS, help="only these parts (default: all): " + ", ".join(PARTS)
    )
    parser.add_argument(
        "--mode",
        action="append",
        choices=cases.MODES,
        help="the matrix's modes (default: " + ", ".join(cases.DEFAULT_MODES) + "; backward: the backward pass alone)",
    )
    parser.add_argument(
        "--keep-heap", action="store_true", help="CPU: glibc keeps freed memory (no page faults for fresh outputs)"
    )
    args = parser.parse_args(argv)
    args.part = set(args.part or PARTS)
    args.mode = [m for m in cases.MODES if m in (args.mode or cases.DEFAULT_MODES)]
    with load.Watch() as watch:  # its readings count the runs' processes as this one's (several_runs)
        if line := load.before_run(watch.readings):
            print(f"WARNING {line}", flush=True)
        if args.runs > 1:
            ctx, rows, extras = several_runs(args)
        else:
            ctx, rows = measure(args)
            extras = {
                "host_time": host_time.measure(args.device, args.quick, args.op) if "host-time" in args.part else [],
                "training": training.measure(args.device, args.quick, args.op) if "training" in args.part else [],
            }
    ctx["load"] = load.verdict(watch.readings, torch.get_num_threads())
    ctx["parts"] = sorted(args.part)
    ctx["modes"] = args.mode
    ctx["spread_bound"] = load.SPREAD_BOUND
    ctx["untrusted"] = load.untrusted(rows, extras)
    ctx["warnings"] = load.warnings(ctx["load"], ctx["untrusted"])
    rows = report.with_speedups(rows)
    report.terminal_table(ctx, rows, extras)
    written = report.write(args.out, ctx, rows, extras)
    print("wrote " + ", ".join(str(p) for p in written.values()))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:  # in GitHub Actions: the table on the job's page
        with open(summary, "a") as f:
            f.write(f"## Benchmark ({ctx['device']})\n\n" + written["markdown"].read_text())
    if args.baseline:
        regressions = report.compare_to_baseline(rows, args.baseline)
        for line in regressions:
            print(f"REGRESSION {line}")
        if regressions:
            return 1
        print(f"no regression against {args.baseline}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
