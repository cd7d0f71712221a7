"""A first GPU timing probe of the kernels (CUDA events, medians) against eager PyTorch,
torch.compile compiled per shape, and the device's copy bandwidth measured in the same run.

    python bench/h200_probe.py

Prints one row per case: milliseconds, GB/s of the bytes that must move, percent of copy.
"""

from __future__ import annotations

import statistics

import torch

import custom_op


def median_ms(fn, warmup=10, reps=60):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_gbps():
    src = torch.empty(2**28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / ms / 1e6


def compiled(fn):
    # Compiled for this shape only (dynamic=False), from a clean cache.
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False, fullgraph=True)


def main():
    torch.manual_seed(0)
    torch._dynamo.config.recompile_limit = 64
    copy = copy_gbps()
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} copy {copy:.0f} GB/s")
    rows = []

    def record(case, impl, ms, nbytes):
        gbps = nbytes / ms / 1e6
        rows.append((case, impl, ms, gbps, 100 * gbps / copy))

    for dtype in (torch.float32, torch.bfloat16):
        es = torch.finfo(dtype).bits // 8
        dname = str(dtype).removeprefix("torch.")
        for log2n in (20, 24, 27):
            n = 2**log2n
            x = torch.randn(n, dtype=dtype, device="cuda")
            w = torch.randn(n, dtype=dtype, device="cuda")
            eager = lambda x, w: w * x.pow(2)  # noqa: E731
            comp = compiled(eager)
            case = f"square fwd {dname} 2^{log2n}"
            for impl, fn in (("custom", custom_op.weighted_square), ("eager", eager), ("compile", comp)):
                record(case, impl, median_ms(lambda: fn(x, w)), 3 * n * es)
            xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
            g = torch.randn_like(x)
            case = f"square fwd+bwd {dname} 2^{log2n}"
            for impl, fn in (("custom", custom_op.weighted_square), ("eager", eager), ("compile", comp)):
                record(case, impl, median_ms(lambda: torch.autograd.grad(fn(xg, wg), (xg, wg), g)), 8 * n * es)
            del x, w, xg, wg, g
        for r, c in ((1048576, 128), (65536, 1024), (8192, 4096), (4096, 65536)):
            x = torch.randn(r, c, dtype=dtype, device="cuda")
            w = torch.randn(c, dtype=dtype, device="cuda")
            eager = lambda x, w: (w * x * x).sum(-1)  # noqa: E731
            comp = compiled(eager)
            case = f"sumsq fwd {dname} {r}x{c}"
            for impl, fn in (("custom", custom_op.weighted_sum_of_squares), ("eager", eager), ("compile", comp)):
                record(case, impl, median_ms(lambda: fn(x, w)), (r * c + c + r) * es)
            xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
            g = torch.randn(r, dtype=dtype, device="cuda")
            case = f"sumsq fwd+bwd {dname} {r}x{c}"
            for impl, fn in (("custom", custom_op.weighted_sum_of_squares), ("eager", eager), ("compile", comp)):
                # forward reads x, w; backward reads x, w, g and writes grad_x, grad_w
                nbytes = (r * c + c + r) * es + (2 * r * c + 2 * c + r) * es
                record(case, impl, median_ms(lambda: torch.autograd.grad(fn(xg, wg), (xg, wg), g)), nbytes)
            del x, w, xg, wg, g
    print(f"{'case':36s} {'impl':8s} {'ms':>9s} {'GB/s':>7s} {'%copy':>6s}")
    for case, impl, ms, gbps, pct in rows:
        print(f"{case:36s} {impl:8s} {ms:9.4f} {gbps:7.0f} {pct:6.1f}")


if __name__ == "__main__":
    main()
