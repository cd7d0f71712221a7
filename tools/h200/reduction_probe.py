# ruff: noqa: B023  (each lambda is called within its loop iteration)
"""The reduction cases that miss their targets, one process: the op's forward and its backward
kernel alone against torch.compile of the same code, each timed as `python -m bench` times (10
warm-up calls, then 50 back-to-back) right after the GPU idled for half a second and again after
200 ms of the same work, three rounds. Run with TORCH_LOGS=output_code to see Inductor's kernels.

    PYTHONPATH=. python tools/h200/reduction_probe.py
"""

from __future__ import annotations

import time

import torch

import custom_op
from bench import timing


def busy(fn, seconds=0.2):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()


def forward_cases():
    for dtype, shape in ((torch.float32, (4096, 65536)), (torch.bfloat16, (1048576, 128)),
                         (torch.float32, (1048576, 128))):  # fmt: skip
        x = torch.randn(shape, device="cuda", dtype=dtype)
        w = torch.randn(shape[-1:], device="cuda", dtype=dtype)
        rows, cols = shape
        nbytes = (rows * cols + cols + rows) * x.element_size()
        compiled = torch.compile(lambda x, w: (w * x * x).sum(-1), dynamic=False, fullgraph=True)
        yield (
            f"forward {str(dtype)[6:]} {rows}x{cols}",
            nbytes,
            {
                "custom_op": lambda: custom_op.weighted_sum_of_squares(x, w),
                "torch.compile": lambda: compiled(x, w),
            },
        )


def backward_cases():
    backward = torch.ops.custom_op.weighted_sum_of_squares_backward
    for dtype, shape in ((torch.float32, (1048576, 128)), (torch.float32, (4096, 65536))):
        x = torch.randn(shape, device="cuda", dtype=dtype)
        w = torch.randn(shape[-1:], device="cuda", dtype=dtype)
        g = torch.randn(shape[:-1], device="cuda", dtype=dtype)
        rows, cols = shape
        nbytes = (2 * rows * cols + 2 * cols + rows) * x.element_size()
        compiled = torch.compile(
            lambda g, x, w: (2 * w * x * g[:, None], (x * x * g[:, None]).sum(0)), dynamic=False, fullgraph=True
        )
        yield (
            f"backward kernels {str(dtype)[6:]} {rows}x{cols}",
            nbytes,
            {
                "custom_op": lambda: backward(g, x, w),
                "torch.compile": lambda: compiled(g, x, w),
            },
        )


def main():
    copy = timing.copy_bandwidth_gbps("cuda")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; copy (back-to-back) {copy:.0f} GB/s")
    for cases in (forward_cases(), backward_cases()):
        for label, nbytes, impls in cases:
            for fn in impls.values():
                fn()  # compile outside the timing
            for round_ in range(3):
                for name, fn in impls.items():
                    torch.cuda.synchronize()
                    time.sleep(0.5)
                    idle, _ = timing.gpu_median_ms(fn)
                    busy(fn)
                    warm, spread = timing.gpu_median_ms(fn)
                    pct = lambda ms: 100 * nbytes / ms / 1e6 / copy  # noqa: E731
                    print(
                        f"{label:40s} {name:14s} round {round_}  after idle {idle:.4f} ms {pct(idle):5.1f}%   "
                        f"after 200 ms busy {warm:.4f} ms {pct(warm):5.1f}% (spread {spread:.3f})"
                    )


if __name__ == "__main__":
    main()
