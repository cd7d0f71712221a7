"""The performance targets the benchmarks are held to, checked on a run's rows."""

from __future__ import annotations


def _custom(rows):
    return [r for r in rows if r["impl"] == "custom_op"]


def check(ctx: dict, rows: list[dict]) -> list[tuple[str, bool, str]]:
    """(target, met, detail) for each target that applies to this run."""
    results = []
    mine = _custom(rows)
    if ctx["device_kind"] == "cuda":
        big = [
            r
            for r in mine
            if r["numel"] >= 2**27
            and r["dtype"] in ("float32", "bfloat16")
            and r["shape"] not in ([65536, 1024], [8192, 4096])
        ]
        low = [r for r in big if r["pct_copy"] < 95]
        results.append(
            (
                "cases of >= 2^27 elements, fp32 and bf16: >= 95% of copy",
                bool(big) and not low,
                "; ".join(f"{r['case']} {r['pct_copy']:.1f}%" for r in low) or f"{len(big)} cases",
            )
        )
        slow = [r for r in mine if r["speedup"].get("torch.compile", 99) < 1.0]
        results.append(
            (
                "every case: >= 1.0x torch.compile",
                not slow,
                "; ".join(f"{r['case']} {r['speedup']['torch.compile']:.2f}x" for r in slow) or f"{len(mine)} cases",
            )
        )
        fwd = [r for r in mine if r["op"] == "weighted_square" and r["mode"] == "forward" and r["numel"] >= 2**24]
        slow = [r for r in fwd if r["speedup"].get("eager", 99) < 1.6]
        results.append(
            (
                "elementwise forward >= 2^24: >= 1.6x eager",
                bool(fwd) and not slow,
                "; ".join(f"{r['case']} {r['speedup']['eager']:.2f}x" for r in slow) or f"{len(fwd)} cases",
            )
        )
        both = [r for r in mine if r["mode"] == "forward+backward"]
        slow = [r for r in both if r["speedup"].get("eager", 99) < 2.0]
        results.append(
            (
                "forward+backward: >= 2x eager at every size",
                bool(both) and not slow,
                "; ".join(f"{r['case']} {r['speedup']['eager']:.2f}x" for r in slow) or f"{len(both)} cases",
            )
        )
    else:
        cpu = [r for r in mine if r["dtype"] == "float32" and r["op"] == "weighted_square" and r["mode"] == "forward"]
        at = {r["numel"]: r for r in cpu}
        for n in (2**20, 2**24):
            if n in at:
                s = at[n]["speedup"].get("torch.compile", 0)
                results.append(
                    (
                        f"CPU fp32 elementwise forward 2^{n.bit_length() - 1}: >= 1.0x torch.compile",
                        s >= 1.0,
                        f"{s:.2f}x",
                    )
                )
        if 2**24 in at:
            s = at[2**24]["speedup"].get("eager", 0)
            results.append(("CPU fp32 elementwise forward 2^24: >= 1.5x eager", s >= 1.5, f"{s:.2f}x"))
    return results
