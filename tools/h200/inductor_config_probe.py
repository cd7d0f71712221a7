"""Which launch configuration does Inductor's autotuner pick for the reduction's forward, and
what do its loads look like? Compiles `(w * x * x).sum(-1)` per shape (as `python -m bench` does),
runs it, then prints the autotuner's choices (`.best_config`), each compiled Triton kernel's
metadata (num_warps, num_stages, block constants) and the global loads of its PTX, which it copies
to $OUT.

    TORCHINDUCTOR_CACHE_DIR=/tmp/inductor PYTHONPATH=. python3 tools/h200/inductor_config_probe.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import torch

CASES = ((torch.float32, (4096, 65536)), (torch.bfloat16, (1048576, 128)), (torch.float32, (1048576, 128)))


def main():
    cache = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/tmp/inductor"))
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    for dtype, shape in CASES:
        x = torch.randn(shape, device="cuda", dtype=dtype)
        w = torch.randn(shape[-1], device="cuda", dtype=dtype)
        torch.compile(lambda x, w: (w * x * x).sum(-1), dynamic=False)(x, w)
        torch.cuda.synchronize()
        torch._dynamo.reset()
    for best in sorted(cache.rglob("*.best_config")):
        print("autotuned:", best.name, best.read_text().strip())
    for meta in sorted(cache.rglob("*.json")):
        try:
            data = json.loads(meta.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict) or "num_warps" not in data:
            continue
        ptx = meta.with_suffix(".ptx")
        print(meta.name, {k: data.get(k) for k in ("name", "num_warps", "num_stages", "constants", "shared")})
        if ptx.exists():
            text = ptx.read_text()
            loads = re.findall(r"ld\.global[^\s]*", text)
            print("  loads:", {k: loads.count(k) for k in sorted(set(loads))}, "lines", text.count("\n"))
            shutil.copy(ptx, out / f"{data.get('name', meta.stem)}-{meta.parent.name[:8]}.ptx")


if __name__ == "__main__":
    main()
