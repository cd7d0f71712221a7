"""Every operator of the registry: torch.library.opcheck, fake kernels, torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest
import torch
from conftest import sample_of

from custom_op.testing import outputs


def _small(spec, device, dtype):
    return [s for s in spec.samples_on(device, dtype) if 0 < s.tensors[0].numel() <= 4096]


def _opcheck(spec, sample) -> None:
    for name in (spec.name, *spec.extra_ops):
        torch.library.opcheck(spec.overload("custom_op", name), sample.args, sample.kwargs)


def test_opcheck(spec, small_sample_id, device):
    """The op and each of spec.extra_ops, with inputs that require grad: opcheck then also checks
    that the autograd registered on the op (torch.library.register_autograd) is the one used."""
    _opcheck(spec, spec.leaves(sample_of(spec, small_sample_id, device)))


def test_opcheck_float64(spec, device):
    """What opcheck checks (schema, fake kernel, autograd registration) depends on the shapes, which
    test_opcheck takes each of in float32: in float64, the first small sample is enough."""
    _opcheck(spec, spec.leaves(_small(spec, device, torch.float64)[0]))


def test_fake_kernel_shape_and_strides_match_real(spec, small_sample_id, device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    sample = sample_of(spec, small_sample_id, device)
    real = spec.function(*sample.args, **sample.kwargs)
    with FakeTensorMode() as mode:
        args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in sample.args]
        fake = spec.function(*args, **sample.kwargs)
    for f, r in zip(outputs(fake), outputs(real), strict=True):
        assert (f.shape, f.stride(), f.dtype) == (r.shape, r.stride(), r.dtype), sample.label


def test_compile_fullgraph_forward_and_backward(spec, device):
    """Through the public function and through torch.ops.<namespace>.<name>, in one graph: one
    compilation an op."""
    torch._dynamo.reset()
    sample = spec.leaves(_small(spec, device, torch.float32)[-1])
    op = spec.overload("custom_op")

    def loss(*args):
        through_function = outputs(spec.function(*args, **sample.kwargs))
        through_op = outputs(spec.op_result(op(*args, **sample.kwargs)))
        return sum((out * 0.5).sum() for out in through_function) + sum((out * 0.25).sum() for out in through_op)

    compiled = torch.compile(loss, fullgraph=True)
    inputs = spec.grad_inputs(sample)
    got = torch.autograd.grad(compiled(*sample.args), inputs)
    want = torch.autograd.grad(loss(*sample.args), inputs)
    for g, r in zip(got, want, strict=True):
        torch.testing.assert_close(g, r)
    torch.testing.assert_close(compiled(*sample.args), loss(*sample.args))


@pytest.mark.isolated
def test_compile_reports_bad_input(spec, device):
    torch._dynamo.reset()
    compiled = torch.compile(spec.function, fullgraph=True, backend="aot_eager")
    for bad in spec.bad_inputs_on(device):
        if not all(isinstance(a, torch.Tensor | float | int) for a in bad.args) or any(
            isinstance(a, torch.Tensor) and a.device.type == "meta" for a in bad.args
        ):
            continue
        with pytest.raises(Exception) as info:
            compiled(*bad.args)
        for fragment in bad.fragments:
            assert fragment in str(info.value), f"{bad.label}: {fragment!r} not in {info.value}"
        return
    pytest.fail(f"{spec.name}: no bad input of tensors and numbers to compile")


def test_fx_symbolic_trace_records_the_op(spec, device):
    """torch.fx traces the public function (its proxies are not tensors) into one of the op's own ops."""
    sample = _small(spec, device, torch.float32)[0]
    tensors = sample.tensors

    def call(t0, t1=None, t2=None, t3=None):  # fx traces named arguments, not *args
        given = iter([t0, t1, t2, t3])
        args = [next(given) if isinstance(a, torch.Tensor) else a for a in sample.args]
        return spec.function(*args, **sample.kwargs)

    traced = torch.fx.symbolic_trace(call, concrete_args={f"t{i}": None for i in range(len(tensors), 4)})
    targets = {n.target for n in traced.graph.nodes if n.op == "call_function"}
    own = {spec.overload("custom_op", name) for name in (spec.name, *spec.extra_ops)}
    assert targets & own, f"{spec.name}: the traced graph calls {targets}, none of {own}"
    torch.testing.assert_close(traced(*tensors), call(*tensors))
