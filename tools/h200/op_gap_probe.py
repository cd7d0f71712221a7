# ruff: noqa: B023  (each lambda is called within its loop iteration)
"""Why does an op run below its standalone kernel? For the cases where `python -m bench` found the
library under the kernel it launches (fp32 elementwise at 2^27, short-row reductions), time in one
process: the op as the benchmark does (back-to-back, an event pair per call), the same with a
synchronization after every call (as the standalone kernels were timed), the op into an existing
output (out=, no allocation), torch.compile, and the copy ceiling. With --ncu it makes a few
calls only, for `ncu` to read each kernel's DRAM bytes, duration and occupancy.

    PYTHONPATH=. python tools/h200/op_gap_probe.py
    PYTHONPATH=. ncu --clock-control none --cache-control none -k regex:'weighted|rows_by|triton' \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,... \
        python tools/h200/op_gap_probe.py --ncu
"""

from __future__ import annotations

import statistics
import sys

import torch

import custom_op
from bench import timing


def synchronized_ms(fn, reps=50):
    for _ in range(10):
        fn()
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def cases():
    ws = lambda x, w: w * x.pow(2)  # noqa: E731
    ss = lambda x, w: (w * x * x).sum(-1)  # noqa: E731
    for dtype, shape, op, eager in (
        (torch.float32, (2**27,), custom_op.weighted_square, ws),
        (torch.bfloat16, (2**27,), custom_op.weighted_square, ws),
        (torch.float32, (1048576, 128), custom_op.weighted_sum_of_squares, ss),
        (torch.bfloat16, (1048576, 128), custom_op.weighted_sum_of_squares, ss),
        (torch.float32, (8192, 4096), custom_op.weighted_sum_of_squares, ss),
    ):
        x = torch.randn(shape, device="cuda", dtype=dtype)
        w = torch.randn(shape if op is custom_op.weighted_square else shape[-1:], device="cuda", dtype=dtype)
        n = x.numel()
        out_numel = n if op is custom_op.weighted_square else n // shape[-1]
        nbytes = (n + w.numel() + out_numel) * x.element_size()
        torch._dynamo.reset()
        compiled = torch.compile(eager, dynamic=False, fullgraph=True)
        impls = {"custom_op": lambda: op(x, w), "torch.compile": lambda: compiled(x, w)}
        if op is custom_op.weighted_square:
            out = torch.empty_like(x)
            impls["custom_op out="] = lambda: op(x, w, out=out)
        yield f"{str(dtype)[6:]} {'x'.join(map(str, shape))} {op.__name__}", nbytes, impls


def main():
    if "--ncu" in sys.argv:
        for _, _, impls in cases():
            for fn in impls.values():
                for _ in range(3):
                    fn()
        torch.cuda.synchronize()
        return
    copy = timing.copy_bandwidth_gbps("cuda")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; copy (back-to-back) {copy:.0f} GB/s")
    for label, nbytes, impls in cases():
        for name, fn in impls.items():
            b2b, _ = timing.gpu_median_ms(fn)
            sync = synchronized_ms(fn)
            pct = lambda ms: 100 * nbytes / ms / 1e6 / copy  # noqa: E731
            print(
                f"{label:40s} {name:15s} back-to-back {b2b:.4f} ms {pct(b2b):5.1f}%   "
                f"synchronized {sync:.4f} ms {pct(sync):5.1f}%"
            )


if __name__ == "__main__":
    main()
