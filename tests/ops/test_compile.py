"""Every operator of the registry: torch.library.opcheck, fake kernels, torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest
import torch


def _small(spec, device, dtype):
    return [s for s in spec.samples(device, dtype) if 0 < s.tensors[0].numel() <= 4096]


def test_opcheck(spec, device):
    op = spec.overload("custom_op")
    for dtype in (torch.float32, torch.float64):
        for sample in _small(spec, device, dtype)[:8]:
            # Inputs without grad: the op is the kernel; its autograd is the Python function's
            # (custom_op._autograd), checked by test_autograd and the compile tests below.
            leaves = sample.detached()
            torch.library.opcheck(op, leaves.args, leaves.kwargs)


def test_fake_kernel_shape_and_strides_match_real(spec, device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    for sample in _small(spec, device, torch.float32):
        real = spec.function(*sample.args, **sample.kwargs)
        with FakeTensorMode() as mode:
            args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in sample.args]
            fake = spec.function(*args, **sample.kwargs)
        assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype), sample.label


def test_compile_fullgraph_forward_and_backward(spec, device):
    torch._dynamo.reset()
    sample = _small(spec, device, torch.float32)[-1].detached(requires_grad=True)

    def loss(*args):
        return (spec.function(*args, **sample.kwargs) * 0.5).sum()

    compiled = torch.compile(loss, fullgraph=True)
    inputs = [a for a in sample.args if isinstance(a, torch.Tensor)]
    got = torch.autograd.grad(compiled(*sample.args), inputs)
    want = torch.autograd.grad(loss(*sample.args), inputs)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r)
    torch.testing.assert_close(compiled(*sample.args), loss(*sample.args))


@pytest.mark.isolated
def test_compile_reports_bad_input(spec, device):
    torch._dynamo.reset()
    compiled = torch.compile(spec.function, fullgraph=True, backend="aot_eager")
    for bad in spec.bad_inputs(device):
        if not all(isinstance(a, torch.Tensor | float | int) for a in bad.args) or any(
            isinstance(a, torch.Tensor) and a.device.type == "meta" for a in bad.args
        ):
            continue
        with pytest.raises(Exception) as info:
            compiled(*bad.args)
        for fragment in bad.fragments:
            assert fragment in str(info.value), f"{bad.label}: {fragment!r} not in {info.value}"
        return


def test_fx_symbolic_trace_records_the_op(spec, device):
    """torch.fx traces the public function (its proxies are not tensors) into the op itself."""
    sample = _small(spec, device, torch.float32)[0]
    tensors = sample.tensors

    def call(t0, t1=None, t2=None, t3=None):  # fx traces named arguments, not *args
        given = iter([t0, t1, t2, t3])
        args = [next(given) if isinstance(a, torch.Tensor) else a for a in sample.args]
        return spec.function(*args, **sample.kwargs)

    traced = torch.fx.symbolic_trace(call, concrete_args={f"t{i}": None for i in range(len(tensors), 4)})
    targets = {n.target for n in traced.graph.nodes if n.op == "call_function"}
    assert spec.overload("custom_op") in targets
    torch.testing.assert_close(traced(*tensors), call(*tensors))
