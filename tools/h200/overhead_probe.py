# ruff: noqa: B023  (each lambda is called within its loop iteration)
"""Where does op-level time go? For a few sizes, the same call timed back-to-back with CUDA events
(as `python -m bench` does), replayed from a CUDA graph (no host work at all), and the host time
per call on a tiny input. A gap between the first two is host overhead, not the kernel.

    PYTHONPATH=. python tools/h200/overhead_probe.py
"""

from __future__ import annotations

import time

import torch

import custom_op
from bench import timing


def graph_ms(fn, reps=20):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    ms, _ = timing.gpu_median_ms(graph.replay, warmup=3, reps=20)
    return ms / reps


def host_us(fn, calls=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


def main():
    impls = {
        "custom_op": custom_op.weighted_square,
        "eager": lambda x, w: w * x.pow(2),
    }
    print(f"{'case':28s} {'impl':10s} {'events ms':>10s} {'graph ms':>10s} {'host us/call (tiny)':>20s}")
    for dtype, log2n in ((torch.float32, 27), (torch.float32, 24), (torch.bfloat16, 24), (torch.float32, 20)):
        x = torch.randn(2**log2n, device="cuda", dtype=dtype)
        w = torch.randn_like(x)
        tiny_x, tiny_w = x[:1024].clone(), w[:1024].clone()
        for name, fn in impls.items():
            ev, _ = timing.gpu_median_ms(lambda fn=fn: fn(x, w))
            gr = graph_ms(lambda fn=fn: fn(x, w))
            host = host_us(lambda fn=fn: fn(tiny_x, tiny_w))
            print(f"{str(dtype)[6:]:9s} 2^{log2n:<2d} forward         {name:10s} {ev:10.4f} {gr:10.4f} {host:20.1f}")
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        g = torch.randn_like(x)
        txg, twg, tg = tiny_x.clone().requires_grad_(), tiny_w.clone().requires_grad_(), tiny_x.clone()
        for name, fn in impls.items():
            ev, _ = timing.gpu_median_ms(lambda fn=fn: torch.autograd.grad(fn(xg, wg), (xg, wg), g))
            host = host_us(lambda fn=fn: torch.autograd.grad(fn(txg, twg), (txg, twg), tg))
            print(f"{str(dtype)[6:]:9s} 2^{log2n:<2d} fwd+bwd         {name:10s} {ev:10.4f} {'':>10s} {host:20.1f}")
    reductions()


def reductions():
    """Forward + backward of weighted_sum_of_squares (1-D w): events against graph replay, whose
    difference is host time the GPU waited for."""
    ops = {"custom_op": custom_op.weighted_sum_of_squares, "eager": lambda x, w: (w * x * x).sum(-1)}
    for dtype, shape in (
        (torch.bfloat16, (1048576, 128)),
        (torch.bfloat16, (65536, 1024)),
        (torch.float32, (1048576, 128)),
        (torch.float32, (8192, 4096)),
    ):
        x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
        w = torch.randn(shape[-1:], device="cuda", dtype=dtype, requires_grad=True)
        g = torch.randn(shape[:-1], device="cuda", dtype=dtype)
        tx = x[:8].detach().clone().requires_grad_()
        tg = g[:8].clone()
        for name, fn in ops.items():

            def call(fn=fn):
                return torch.autograd.grad(fn(x, w), (x, w), g)

            ev, _ = timing.gpu_median_ms(call)
            gr = graph_ms(call, reps=5)
            host = host_us(lambda fn=fn: torch.autograd.grad(fn(tx, w), (tx, w), tg))
            label = f"{str(dtype)[6:]:9s} {'x'.join(map(str, shape)):12s} fwd+bwd"
            print(f"{label:28s} {name:10s} {ev:10.4f} {gr:10.4f} {host:20.1f}")


if __name__ == "__main__":
    main()
