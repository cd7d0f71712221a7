"""Why one kernel times differently in the benchmark's process and in library_ab.py's: the 2-byte
1048576x128 forward, in one process, timed as library_ab.py times it (plain), inside the
benchmark's progress bar, through the benchmark's runner, after torch.compile of the eager code
has run on the same shape, and plain again; three medians each, percent of the copy bandwidth
measured in the same process. Then x at offsets into one allocation, and x allocated while a
512 MB tensor lives (as in library_ab.py, whose fp32 case runs first), each with its address.

    PYTHONPATH=. python3 tools/h200/harness_probe.py
"""

from __future__ import annotations

import torch
from rich.progress import Progress

import custom_op
from bench import cases, timing
from tools.h200.library_ab import medians


def report(label, dtype, call, nbytes, copy):
    print(f"{label:60} {str(dtype)[6:]:9} {medians(call, nbytes, copy)}", flush=True)


def probe(dtype, copy):
    case = cases.Case("weighted_sum_of_squares", "forward", dtype, (1048576, 128))
    nbytes = case.bytes_moved()
    x = torch.randn(case.shape, device="cuda", dtype=dtype)
    w = torch.randn(case.w_shape, device="cuda", dtype=dtype)

    def plain():
        return custom_op.weighted_sum_of_squares(x, w)

    report("plain", dtype, plain, nbytes, copy)
    with Progress(transient=True) as progress:
        progress.add_task("probe", total=1)
        report("plain, progress bar running", dtype, plain, nbytes, copy)
    runner = cases.runner(case, custom_op.weighted_sum_of_squares, "cuda")
    report("bench runner (its own x and w)", dtype, runner, nbytes, copy)
    compiled = torch.compile(cases.eager_weighted_sum_of_squares, dynamic=False, fullgraph=True)
    report("torch.compile (same x, w)", dtype, lambda: compiled(x, w), nbytes, copy)
    report("plain, after torch.compile", dtype, plain, nbytes, copy)
    torch._dynamo.reset()


def placement(dtype, copy):
    case = cases.Case("weighted_sum_of_squares", "forward", dtype, (1048576, 128))
    nbytes, numel = case.bytes_moved(), case.numel
    w = torch.randn(case.w_shape, device="cuda", dtype=dtype)
    for offset in (0, 256, 4096, 65536, 2**20, 2**21, 2**25):
        buf = torch.empty(numel + offset // 2, device="cuda", dtype=dtype)
        x = buf[offset // 2 :].view(case.shape).normal_()
        out = custom_op.weighted_sum_of_squares(x, w)
        where = f"x at {x.data_ptr():#x} (+{offset} B), out at {out.data_ptr():#x}"
        report(where, dtype, lambda x=x: custom_op.weighted_sum_of_squares(x, w), nbytes, copy)
        del buf, x, out
    big = torch.empty(2**27, device="cuda", dtype=torch.float32)
    x = torch.randn(case.shape, device="cuda", dtype=dtype)
    report(
        f"x at {x.data_ptr():#x}, a 512 MB tensor alive",
        dtype,
        lambda: custom_op.weighted_sum_of_squares(x, w),
        nbytes,
        copy,
    )
    del big


def main():
    copy = timing.copy_bandwidth_gbps("cuda")
    print(f"copy {copy:.0f} GB/s")
    for dtype in (torch.bfloat16, torch.float16):
        probe(dtype, copy)
    for dtype in (torch.bfloat16, torch.float16):
        placement(dtype, copy)


if __name__ == "__main__":
    main()
