# ruff: noqa: B023  (each lambda is called within its loop iteration)
"""A/B of two builds of the library on one GPU machine: each build copied in turn over
custom_op/_C.abi3.so and timed in its own process, alternating (A B A B), three medians per case,
as percent of the copy bandwidth measured in that process (the forward's output checked against
float64 first). Cases: the reduction's forward with a 1-D w (short, medium and long rows), its
backward kernels with a 1-D w or with w like x, or the elementwise op's forward and backward
kernels with w like x (the benchmark's form).

    for v in A B A B; do cp build/ab/$v.so custom_op/_C.abi3.so
        PYTHONPATH=. python3 tools/h200/library_ab.py $v --case forward; done
"""

from __future__ import annotations

import argparse

import torch

import custom_op
from bench import timing

FORWARD = (
    (torch.float32, (1048576, 128)),
    (torch.bfloat16, (1048576, 128)),
    (torch.float16, (1048576, 128)),
    (torch.float32, (65536, 1024)),
    (torch.float16, (65536, 1024)),
    (torch.bfloat16, (65536, 1024)),
    (torch.bfloat16, (8192, 4096)),
    (torch.bfloat16, (16384, 4096)),
    (torch.float32, (4096, 65536)),
    (torch.bfloat16, (4096, 65536)),
    (torch.float16, (4096, 65536)),
    (torch.float32, (8192, 65536)),
    (torch.float16, (8192, 65536)),
    # hidden sizes of common models (fp32 rows of 2048, 8192 and 16384 compiled in; 4096 and fp16 not)
    *(
        (dtype, shape)
        for shape in ((32768, 2048), (8192, 4096), (16384, 4096), (8192, 8192), (4096, 16384))
        for dtype in (torch.float32, torch.float16)
    ),
)
BACKWARD = (
    (torch.float32, (1048576, 128)),
    (torch.bfloat16, (1048576, 128)),
    (torch.float16, (1048576, 128)),
    (torch.float32, (65536, 1024)),
    (torch.bfloat16, (65536, 1024)),
    (torch.float32, (4096, 65536)),
    (torch.bfloat16, (4096, 65536)),
    (torch.float16, (4096, 65536)),
)
ELEMENTWISE = (
    (torch.float32, (2**26,)),
    (torch.float32, (2**27,)),
    (torch.bfloat16, (2**27,)),
)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("label")
    cases = ("forward", "backward", "backward-w-like-x", "elementwise")
    parser.add_argument("--case", choices=cases, default="forward")
    args = parser.parse_args()
    copy = timing.copy_bandwidth_gbps("cuda")
    backward = torch.ops.custom_op.weighted_sum_of_squares_backward
    square_backward = torch.ops.custom_op.weighted_square_backward
    shapes = {"forward": FORWARD, "elementwise": ELEMENTWISE}.get(args.case, BACKWARD)
    for dtype, shape in shapes:
        torch.manual_seed(0)
        x = torch.randn(shape, device="cuda", dtype=dtype)
        rows, cols = (1, *shape)[-2:]
        if args.case == "elementwise":
            w = torch.randn(shape, device="cuda", dtype=dtype)
            g = torch.randn(shape, device="cuda", dtype=dtype)
            for label, nbytes, call in (
                ("forward", 3 * x.numel() * x.element_size(), lambda: custom_op.weighted_square(x, w)),
                ("backward", 5 * x.numel() * x.element_size(), lambda: square_backward(g, x, w)),
            ):
                report(args.label, f"elementwise {label}", dtype, shape, call, nbytes, copy)
            continue
        if args.case == "forward":
            w = torch.randn(cols, device="cuda", dtype=dtype)
            nbytes = (x.numel() + cols + rows) * x.element_size()
            call = lambda: custom_op.weighted_sum_of_squares(x, w)  # noqa: E731
            check_forward(call(), x, w)
        elif args.case == "backward":
            w = torch.randn(cols, device="cuda", dtype=dtype)
            g = torch.randn(rows, device="cuda", dtype=dtype)
            nbytes = (2 * x.numel() + 2 * cols + rows) * x.element_size()  # x, w, g in; both gradients out
            call = lambda: backward(g, x, w)  # noqa: E731
        else:
            w = torch.randn(shape, device="cuda", dtype=dtype)
            g = torch.randn(rows, device="cuda", dtype=dtype)
            nbytes = (4 * x.numel() + rows) * x.element_size()  # read x, w, g; write both gradients
            call = lambda: backward(g, x, w)  # noqa: E731
        report(args.label, args.case, dtype, shape, call, nbytes, copy)


def check_forward(out, x, w):
    """A build that computes the wrong thing must not win: the forward against float64."""
    reference = (w.double() * x.double() * x.double()).sum(-1)
    scale = (w.double().abs() * x.double() * x.double()).sum(-1)
    error = ((out.double() - reference).abs() / scale).max().item()
    tolerance = 1e-5 if x.dtype == torch.float32 else 1e-2
    if not error <= tolerance:
        raise SystemExit(f"forward {x.dtype} {tuple(x.shape)}: relative error {error:.2e} > {tolerance:.0e}")


def medians(call, nbytes, copy):
    """Three medians of `call`, each in ms and percent of the copy bandwidth."""
    ms = [timing.gpu_median_ms(call)[0] for _ in range(3)]
    return " ".join(f"{m:.4f} ms {100 * nbytes / m / 1e6 / copy:5.1f}%" for m in ms)


def report(label, case, dtype, shape, call, nbytes, copy):
    print(label, case, str(dtype)[6:], shape, medians(call, nbytes, copy), flush=True)


if __name__ == "__main__":
    main()
