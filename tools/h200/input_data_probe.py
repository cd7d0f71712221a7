# ruff: noqa: B023  (each lambda is called within its loop iteration)
"""Does the data decide the reduction's speed? The library's 4096x65536 forward ran at 106% of copy
in the standalone harness (x filled by a hash, uniform in [-0.5, 0.5)) and at 102-104% in the
benchmark (x from torch.randn), where Triton reached 106-109%. Here, in one process: the op and
torch.compile (per shape) on x from torch.randn, uniform in [-0.5, 0.5), and zeros, three medians
each, as percent of the copy bandwidth measured in the same process. Also the one-process
comparison with Inductor for the row lengths compiled in (65536x1024, 32768x2048, 8192x8192).

    PYTHONPATH=. python3 tools/h200/input_data_probe.py
"""

from __future__ import annotations

import torch

import custom_op
from bench import timing

CASES = (
    (torch.float32, (65536, 1024)),
    (torch.float16, (65536, 1024)),
    (torch.float32, (32768, 2048)),
    (torch.float32, (8192, 8192)),
    (torch.float32, (4096, 65536)),
    (torch.bfloat16, (4096, 65536)),
    (torch.float16, (4096, 65536)),
    (torch.bfloat16, (1048576, 128)),
)
FILLS = {
    "randn": lambda x: x.normal_(),
    "uniform": lambda x: x.uniform_(-0.5, 0.5),
    "zeros": lambda x: x.zero_(),
}


def main():
    copy = timing.copy_bandwidth_gbps("cuda")
    print(f"copy {copy:.0f} GB/s", flush=True)
    for dtype, shape in CASES:
        torch.manual_seed(0)
        x = torch.empty(shape, device="cuda", dtype=dtype)
        w = torch.randn(shape[-1], device="cuda", dtype=dtype)
        nbytes = (x.numel() + shape[-1] + shape[0]) * x.element_size()
        compiled = torch.compile(lambda x, w: (w * x * x).sum(-1), dynamic=False)
        for fill_name, fill in FILLS.items():
            fill(x)
            for label, call in (
                ("custom_op", lambda: custom_op.weighted_sum_of_squares(x, w)),
                ("torch.compile", lambda: compiled(x, w)),
            ):
                ms = [timing.gpu_median_ms(call)[0] for _ in range(3)]
                pct = " ".join(f"{m:.4f} ms {100 * nbytes / m / 1e6 / copy:5.1f}%" for m in ms)
                print(f"{str(dtype)[6:]:9} {str(shape):14} {fill_name:8} {label:14} {pct}", flush=True)


if __name__ == "__main__":
    main()
