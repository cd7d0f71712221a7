"""The benchmark harness: bytes counted, outputs written, regressions flagged beyond noise."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import custom_op
from custom_op.testing import outputs

if custom_op.LIBRARY_PATH is None:  # the build's other tests run without the library; these call the operators
    pytest.skip(f"the library did not load: {custom_op._LOAD_ERROR}", allow_module_level=True)

# The harness lives in the checkout (python -m pytest from its root puts it on sys.path).
bench_main = pytest.importorskip("bench.__main__", reason="run from the repository root")
cases = pytest.importorskip("bench.cases")
report = pytest.importorskip("bench.report")
ROOT = Path(__file__).resolve().parents[2]


def _elements(op: str) -> int:
    return max(math.prod(shape) for shape in cases.SPECS[op].bench_shapes("cpu", True))


# Any registered operator: the harness is the same for all. The one of the smallest quick shapes, the quickest to run.
OP = min(sorted(cases.SPECS), key=_elements)


@pytest.mark.parametrize("op", sorted(cases.SPECS))
def test_bytes_that_must_move_are_the_ops_count(op):
    spec = cases.SPECS[op]
    shape = spec.bench_shapes("cpu", True)[0]
    forward = cases.Case(op, "forward", torch.float32, shape)
    both = cases.Case(op, "forward+backward", torch.bfloat16, shape)
    backward = cases.Case(op, "backward", torch.bfloat16, shape)
    half = spec.make_sample(shape, torch.bfloat16, "meta")
    assert forward.bytes_moved() == spec.bytes_moved(spec.make_sample(shape, torch.float32, "meta"), False) > 0
    assert both.bytes_moved() == spec.bytes_moved(half, True)
    assert both.bytes_moved() > forward.bytes_moved() // 2  # half the bytes per element, and a backward
    assert 0 < backward.bytes_moved() == both.bytes_moved() - spec.bytes_moved(half, False)


def test_every_registered_operator_is_benchmarked():
    from custom_op import ops

    measured = {case.op for case in cases.all_cases("cpu", quick=True)}
    assert measured == set(ops.OPERATORS)
    assert all(case.bytes_moved() > 0 for case in cases.all_cases("cpu", quick=True))


def _never(*args, **kwargs):
    raise AssertionError("the benchmark timed the test reference")


@pytest.mark.parametrize("mode", cases.MODES)
def test_eager_and_compile_columns_time_the_baseline_not_the_reference(monkeypatch, mode):
    spec, called = cases.SPECS[OP], []

    def baseline(*args, **kwargs):
        called.append("baseline")
        return spec.function(*args, **kwargs)

    monkeypatch.setitem(cases.SPECS, OP, dataclasses.replace(spec, baseline=baseline, reference=_never))
    case = cases.Case(OP, mode, torch.float32, spec.bench_shapes("cpu", True)[0])
    sample = case.sample("cpu")
    impls = cases.implementations(case, sample)
    assert impls["eager"] is baseline
    for name in ("eager", "torch.compile"):
        called.clear()
        run = cases.runner(case, impls[name], sample)
        made = len(called)  # the forward whose graph a backward-alone run reuses
        run()
        assert "baseline" in called, name
        assert called[made:] == ([] if mode == "backward" else ["baseline"]), name


def test_the_backward_alone_reruns_one_graphs_backward():
    """--mode backward: the forward once, then each call its backward (retain_graph), the same
    gradients every time; the modes asked for, and only those, are the matrix's."""
    spec = cases.SPECS[OP]
    case = cases.Case(OP, "backward", torch.float32, spec.bench_shapes("cpu", True)[0])
    run = cases.runner(case, spec.function, case.sample("cpu"))
    first, again = run(), run()
    assert len(first) == len(again) > 0
    for a, b in zip(first, again, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert {c.mode for c in cases.all_cases("cpu", quick=True)} == set(cases.DEFAULT_MODES)
    assert {c.mode for c in cases.all_cases("cpu", quick=True, modes=("backward",))} == {"backward"}


@pytest.mark.slow  # a whole benchmark run
def test_an_op_without_a_baseline_is_timed_alone_and_reported_so(monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # Without its layer of the transformer block too: the block through PyTorch's ops calls the baseline.
    alone = dataclasses.replace(cases.SPECS[OP], baseline=None, block=None, reference=_never)
    monkeypatch.setitem(cases.SPECS, OP, alone)
    assert OP in cases.without_baseline()
    args = ["--quick", "--device", "cpu", "--op", OP, "--part", "matrix", "--part", "host-time"]
    assert bench_main.main([*args, "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench-cpu.json").read_text())
    assert {row["impl"] for row in data["rows"]} <= {"custom_op", "custom_op out=", "custom_op in place"}
    assert OP in data["context"]["without_baseline"]
    table = (tmp_path / "bench-cpu.md").read_text()
    assert f"| {OP} forward float32 " in table and report.NO_BASELINE in table


def _rows(ms, spread=0.01):
    return [{"case": "c", "impl": "custom_op", "ms": ms, "spread": spread}]


def test_regressions_flagged_beyond_noise(tmp_path):
    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"rows": _rows(1.0)}))
    assert report.compare_to_baseline(_rows(1.2), baseline)  # +20% with 1% noise: a regression
    assert not report.compare_to_baseline(_rows(1.05), baseline)  # within the 10% floor
    assert not report.compare_to_baseline(_rows(1.2, spread=0.15), baseline)  # noisy run: 30% tolerance
    other = [{"case": "another machine's case", "impl": "custom_op", "ms": 1.0, "spread": 0.01}]
    assert "nothing was compared" in report.compare_to_baseline(other, baseline)[0]


def test_on_a_gpu_the_kernels_time_decides_a_regression(tmp_path):
    def gpu_rows(ms, gpu_ms):
        return [{"case": "c", "impl": "custom_op", "ms": ms, "spread": 0.01, "gpu_ms": gpu_ms, "gpu_spread": 0.01}]

    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"rows": gpu_rows(1.0, 0.5)}))
    assert not report.compare_to_baseline(gpu_rows(1.5, 0.5), baseline)  # a slower host, the same kernels
    assert report.compare_to_baseline(gpu_rows(1.0, 0.6), baseline)  # slower kernels
    assert "GPU time" in report.compare_to_baseline(gpu_rows(1.0, 0.6), baseline)[0]


@pytest.mark.slow  # a whole benchmark run
def test_quick_run_writes_json_markdown_and_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    if cases.SPECS[OP].baseline is None:  # the columns need one; any PyTorch code of the same math
        monkeypatch.setitem(cases.SPECS, OP, dataclasses.replace(cases.SPECS[OP], baseline=cases.SPECS[OP].reference))
    args = ["--quick", "--device", "cpu", "--op", OP, "--part", "matrix", "--mode", "forward"]  # the harness, once
    assert bench_main.main([*args, "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench-cpu.json").read_text())
    assert data["context"]["copy_gbps"] > 0 and data["context"]["torch"] == torch.__version__
    assert data["context"]["library_sha256"] == report.library_sha256()  # which build was measured
    assert len(data["context"]["library_sha256"]) == 12
    impls = {row["impl"] for row in data["rows"]}
    assert impls >= {"custom_op", "eager", "torch.compile"}
    assert all(row["ms"] > 0 and row["gbps"] > 0 for row in data["rows"])
    markdown = (tmp_path / "bench-cpu.md").read_text()
    assert f"| {OP} forward float32 " in markdown
    assert report.CPU_ABOVE_COPY in markdown  # why a CPU case can pass 100% of copy
    assert (tmp_path / "bench-cpu.png").read_bytes()[:4] == b"\x89PNG"


def _run(copy, times):
    rows = [
        {"case": "c", "impl": impl, "ms": ms, "spread": 0.01, "gbps": 12.0 / ms, "pct_copy": 0.0}
        for impl, ms in times.items()
    ]
    return {"context": {"copy_gbps": copy, "device": "d"}, "rows": rows}


def test_several_runs_combine_into_medians_with_their_range_as_spread():
    combine = pytest.importorskip("bench.combine")
    ctx, rows = combine.combine(
        [_run(100.0, {"custom_op": 1.0, "eager": 2.0}), _run(110.0, {"custom_op": 1.2, "eager": 2.0}),
         _run(90.0, {"custom_op": 1.1, "eager": 2.2})]
    )  # fmt: skip
    assert ctx["runs"] == 3 and ctx["copy_gbps"] == 100.0
    mine = next(r for r in rows if r["impl"] == "custom_op")
    assert mine["ms"] == 1.1 and mine["runs"] == 3
    assert mine["gbps"] == pytest.approx(12.0 / 1.1)  # the bytes counted once, over the median time
    assert mine["pct_copy"] == pytest.approx(100 * (12.0 / 1.1) / 100.0)
    assert mine["spread"] == pytest.approx(0.2 / 1.1, abs=1e-4)  # the range across runs, not the in-run 1%
    with pytest.raises(ValueError, match="no runs"):
        combine.combine([])


def test_several_runs_combine_the_gpu_time_view_too():
    combine = pytest.importorskip("bench.combine")
    runs = [_run(100.0, {"custom_op": ms}) for ms in (1.0, 1.2, 1.1)]
    for run, gpu_ms in zip(runs, (0.5, 0.7, 0.6), strict=True):
        run["rows"][0].update(gpu_ms=gpu_ms, gpu_spread=0.01, gpu_pct_copy=0.0)
        run["training"] = [{"case": "t", "impl": "custom_op", "ms": 2 * gpu_ms, "spread": 0.01,
                            "gpu_ms": gpu_ms, "gpu_spread": 0.01}]  # fmt: skip
    _, rows = combine.combine(runs)
    assert rows[0]["gpu_ms"] == 0.6 and rows[0]["gpu_spread"] == pytest.approx(0.2 / 0.6, abs=1e-4)
    assert rows[0]["gpu_pct_copy"] == pytest.approx(100 * 12.0 / 0.6 / 100.0)  # 12 bytes over the median
    training = combine.extras(runs)["training"][0]
    assert training["ms"] == 1.2 and training["gpu_ms"] == 0.6


def test_implementations_are_timed_in_interleaved_rounds():
    timing = pytest.importorskip("bench.timing")
    order, per_round = [], {"a": iter([(1.0, 0.01), (3.0, 0.01), (2.0, 0.01)]), "b": iter([(5.0, 0.5)] * 3)}

    def timer(name):
        order.append(name)
        return next(per_round[name])

    medians = timing.interleaved_medians({"a": "a", "b": "b"}, timer, rounds=3)
    assert order == ["a", "b"] * 3  # every implementation once a round, in turn
    assert medians["a"] == (2.0, pytest.approx(timing.spread([1.0, 3.0, 2.0])))  # the rounds' spread
    assert medians["b"] == (5.0, 0.5)  # the larger: the median spread within a round


@pytest.mark.slow  # a whole benchmark run
def test_runs_in_separate_processes(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    args = ["--quick", "--device", "cpu", "--op", OP, "--out", str(tmp_path), "--runs", "2", "--mode", "forward"]
    args += ["--part", "matrix", "--part", "host-time"]  # what the runs' processes are, not every part again
    args.append("--keep-heap")  # passed on to each run's process
    (tmp_path / "run-1").mkdir()
    (tmp_path / "run-1" / "bench-cpu-float32.json").write_text("{}")  # an earlier run's: not combined
    assert bench_main.main(args) == 0
    assert sorted(p.name for p in tmp_path.glob("run-*")) == ["run-1", "run-2"]
    data = json.loads((tmp_path / "bench-cpu.json").read_text())
    assert data["context"]["runs"] == 2
    assert all(row["runs"] == 2 for row in data["rows"])
    assert data["context"]["keep_heap"] is True
    assert "Medians of 2 runs" in (tmp_path / "bench-cpu.md").read_text()
    shown = capsys.readouterr().out  # each run's progress, passed on as it came
    assert "[bench] run 1/2: matrix 1/" in shown and "[bench] run 2/2: host time: " in shown


def test_keep_heap_stops_page_faults_for_fresh_outputs():
    pytest.importorskip("bench.heap")
    script = (
        "import resource, sys, torch\n"
        "if sys.argv[1] == 'keep':\n"
        "    from bench import heap; heap.keep_heap()\n"
        "x = torch.randn(2**20)\n"
        "for _ in range(50): (x * 2, x * 3, x * 4)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(100): (x * 2, x * 3, x * 4)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )

    def faults(mode):
        done = subprocess.run([sys.executable, "-c", script, mode], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    # 100 calls, each making three fresh 4 MB outputs (3072 pages): kept, their pages are reused
    # (a few faults remain while the heap reaches its size).
    kept, default = faults("keep"), faults("default")
    assert kept < 100 * 30, (kept, default)
    if default >= 100 * 300:  # glibc's defaults here hand the memory back and fault it in again
        assert kept * 20 < default


@pytest.mark.parametrize("op", sorted(cases.SPECS))
def test_the_training_step_models_compute_the_same_gradients(op, device):
    """The model through the op and the same model through PyTorch's ops: one loss, the same
    gradients for every parameter and batch tensor that requires grad (float64)."""
    training = pytest.importorskip("bench.training")
    spec = cases.SPECS[op]
    if spec.training is None:
        pytest.skip(f"{op}'s spec declares no training model (OpSpec.training): no training step")
    made, batch, _ = training.models(spec, device, torch.float64, quick=True)
    mine, plain = (training.step(made[name], batch) for name in ("custom_op", "plain PyTorch"))
    wanted = list(made["custom_op"].parameters()) + [
        t for t in batch if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    assert len(mine) == len(plain) == len(wanted) > 0
    for got, want in zip(mine, plain, strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(made["custom_op"](*batch), made["plain PyTorch"](*batch))


@pytest.mark.slow  # a whole benchmark run
def test_host_time_and_training_step_parts_are_reported(tmp_path, monkeypatch):
    training = pytest.importorskip("bench.training")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # One operator's (the parts are the same code for every operator; each one's training model is
    # checked by test_the_training_step_models_compute_the_same_gradients).
    if not training.specs():
        pytest.skip("no operator of the tree declares a training model (OpSpec.training)")
    spec = next((s for s in training.specs() if s.name == OP), training.specs()[0])
    args = ["--quick", "--device", "cpu", "--part", "host-time", "--part", "training", "--op", spec.name]
    assert bench_main.main([*args, "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench-cpu.json").read_text())
    assert data["rows"] == [] and data["context"]["parts"] == ["host-time", "training"]
    host = {(r["case"], r["impl"]) for r in data["host_time"]}
    for mode in ("no grad", "forward+backward"):
        timed = {"custom_op", "eager"} if spec.baseline else {"custom_op"}  # eager: the baseline
        assert {(f"{spec.name} {mode}", impl) for impl in timed} <= host
        assert spec.baseline or (f"{spec.name} {mode}", "eager") not in host
    trained = {(r["op"], r["impl"]) for r in data["training"]}
    impls = ("custom_op", "plain PyTorch", "custom_op compiled", "plain PyTorch compiled")
    assert trained == {(spec.name, impl) for impl in impls}
    assert all(r["us"] > 0 for r in data["host_time"]) and all(r["ms"] > 0 for r in data["training"])
    text = (tmp_path / "bench-cpu.md").read_text()
    assert "Host time per call" in text
    label = spec.training_case("cpu", torch.float32, True).label
    assert f"| training step {spec.name} float32 {label} |" in text
    assert not (tmp_path / "bench-cpu.png").exists()  # the plot is of the matrix


def test_host_time_above_eagers_is_explained():
    host_cost = pytest.importorskip("bench.host_cost")
    rows = [{"case": "a no grad", "impl": "custom_op", "us": 19.0, "spread": 0.05},
            {"case": "a no grad", "impl": "eager", "us": 6.8, "spread": 0.05},
            {"case": "b no grad", "impl": "custom_op", "us": 5.0, "spread": 0.05},
            {"case": "b no grad", "impl": "eager", "us": 6.0, "spread": 0.05},
            {"case": "c no grad", "impl": "custom_op", "us": 9.0, "spread": 0.05}]  # fmt: skip
    assert host_cost.above_eager(rows) == [("a no grad", 19.0, 6.8)]
    text = "\n".join(report.host_time_markdown(rows))
    assert "Host time above eager's (a no grad 19.0 us against eager's 6.8)" in text and "b no grad 5.0" not in text
    for what in ("Python call", "argument checks", "stable ABI", "allocation", "decoding", "CUDA graph",
                 'torch.compile(mode="reduce-overhead")'):  # fmt: skip
        assert what in text
    assert host_cost.note(rows[2:]) is None  # cheaper than eager, or no eager: nothing to explain


def test_other_libraries_are_timed_beside_the_baseline(monkeypatch):
    """An op's OpSpec.other_libraries: timed as further implementations (a reduced loss's gradient
    is 1), with custom_op's speedup over each in the report's own table."""
    spec = next(s for s in cases.SPECS.values() if s.baseline is not None)

    def summed(*args, **kwargs):
        return sum(out.float().sum() for out in outputs(spec.baseline(*args, **kwargs)))

    monkeypatch.setitem(cases.SPECS, spec.name, dataclasses.replace(spec, other_libraries=lambda d: {"summed": summed}))
    case = cases.Case(spec.name, "forward+backward", torch.float32, tuple(spec.bench_shapes("cpu", True)[0]))
    sample = case.sample("cpu")
    impls = cases.implementations(case, sample)
    assert {"custom_op", "eager", "torch.compile", "summed"} <= set(impls)
    grads = cases.runner(case, impls["summed"], sample)()
    assert all(torch.isfinite(g).all() for g in grads)
    rows = [{"case": case.label, "impl": name, "ms": ms, "gbps": 1.0, "pct_copy": 1.0} for name, ms in
            [("custom_op", 1.0), ("eager", 2.0), ("torch.compile", 1.5), ("summed", 3.0)]]  # fmt: skip
    text = "\n".join(report.other_libraries_markdown(report.with_speedups(rows)))
    assert f"| {case.label} | summed | 3.0000 |" in text and "| 3.00x |" in text
    assert "| eager |" not in text and "| torch.compile |" not in text  # the main table's columns


def test_liger_columns_are_cuda_only():
    """Liger-Kernel's kernels are Triton, for CUDA: the examples ask for them on a GPU alone."""
    with_liger = [spec for spec in cases.SPECS.values() if getattr(spec.other_libraries, "__name__", "") == "liger"]
    if not with_liger:
        pytest.skip("no operator of the tree times Liger-Kernel")
    assert all(spec.other_libraries("cpu") == {} for spec in with_liger)


@pytest.mark.multiprocess
def test_parallel_training_benchmark_reports_tokens_per_second(tmp_path):
    """torchrun --standalone --nproc-per-node 2 -m bench.parallel --quick: both layouts, both models, over gloo."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "bench.parallel",
               "--quick", "--device", "cpu", "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = json.loads((tmp_path / "bench-parallel-cpu-2.json").read_text())
    rows = written["rows"]
    assert set(written["roles"]) <= {"norm", "activation", "loss"}, written["roles"]  # role: the op in it
    assert {(r["layout"], r["impl"]) for r in rows} == {
        (layout, impl) for layout in ("tp_sp", "fsdp2") for impl in ("custom_op", "plain PyTorch")
    }
    assert all(r["world"] == 2 and r["tokens_per_s"] > 0 and r["ms"] > 0 for r in rows)
    shown = [line for line in done.stdout.splitlines() if line.startswith("[bench] parallel")]  # rank 0's alone
    assert [line.split(":")[0] for line in shown if "still timing" not in line] == [
        "[bench] parallel 1/2", "[bench] parallel 2/2", "[bench] parallel"
    ]  # fmt: skip


def test_parallel_benchmark_without_torchrun_says_how_to_start_it():
    done = subprocess.run([sys.executable, "-m", "bench.parallel"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "torchrun --standalone --nproc-per-node 2 -m bench.parallel" in done.stderr
