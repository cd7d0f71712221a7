# ruff: noqa: B023  (each lambda is called within its loop iteration)
"""Host time per call on tiny tensors, where only the host works: the public functions against
the same ops called through their full dispatch (the Python Autograd kernel included) and eager
PyTorch, forward without grad and forward + backward. Interleaved rounds, medians.

    PYTHONPATH=. python tools/host_time.py [--device cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import custom_op


def per_call_us(fn, device, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def cases(device):
    x = torch.randn(16, device=device)
    w = torch.randn(16, device=device)
    out = torch.empty_like(x)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    g = torch.randn(16, device=device)
    ops = torch.ops.custom_op
    return {
        "weighted_square: custom_op.weighted_square": lambda: custom_op.weighted_square(x, w),
        "weighted_square: torch.ops (full dispatch)": lambda: ops.weighted_square.default(x, w),
        "weighted_square: eager w * x.pow(2)": lambda: w * x.pow(2),
        "weighted_square out=: custom_op": lambda: custom_op.weighted_square(x, w, out=out),
        "weighted_square out=: torch.ops (full dispatch)": lambda: ops.weighted_square.out(x, w, out=out),
        "weighted_sum_of_squares: custom_op": lambda: custom_op.weighted_sum_of_squares(x, w),
        "weighted_sum_of_squares: torch.ops (full dispatch)": lambda: ops.weighted_sum_of_squares.default(x, w),
        "weighted_sum_of_squares: eager (w * x * x).sum(-1)": lambda: (w * x * x).sum(-1),
        "weighted_square fwd+bwd: custom_op": lambda: torch.autograd.grad(
            custom_op.weighted_square(xg, wg), (xg, wg), g
        ),
        "weighted_square fwd+bwd: eager": lambda: torch.autograd.grad(wg * xg.pow(2), (xg, wg), g),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    todo = cases(args.device)
    samples = {name: [] for name in todo}
    for fn in todo.values():
        per_call_us(fn, args.device, 200)  # warm-up
    for _ in range(args.rounds):
        for name, fn in todo.items():
            samples[name].append(per_call_us(fn, args.device, 2000 if "bwd" not in name else 500))
    print(f"torch {torch.__version__}, device {args.device}, 1 thread; median of {args.rounds} rounds")
    for name, values in samples.items():
        print(f"{name:55s} {statistics.median(values):7.2f} us per call")


if __name__ == "__main__":
    main()
