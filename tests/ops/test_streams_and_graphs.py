"""Every operator of the registry on the GPU: PyTorch's current stream, CUDA graph capture and
replay of forward and backward, and more than 2^31 elements (the shape its spec's kind gives)."""

from __future__ import annotations

import pytest
import torch

from custom_op.testing import outputs, total

HAS_CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")]


def _shape(spec):
    return spec.bench_shapes("cuda", True)[-1]


def _sample(spec, dtype=torch.float32):
    return spec.sample_of_shape(_shape(spec), dtype, "cuda")


def test_runs_on_the_current_stream(spec):
    # The inputs are only written on the side stream, after a delay: an op on another stream reads zeros.
    source = _sample(spec)
    expected = spec.function(*source.args, **source.kwargs)
    inputs = [torch.zeros_like(a) if isinstance(a, torch.Tensor) else a for a in source.args]
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)
        for given, src in zip(inputs, source.args, strict=True):
            if isinstance(given, torch.Tensor):
                given.copy_(src)
        out = spec.function(*inputs, **source.kwargs)
    stream.synchronize()
    torch.testing.assert_close(out, expected)


def test_cuda_graph_capture_and_replay(spec):
    sample = spec.leaves(_sample(spec))
    leaves = spec.grad_inputs(sample)

    def step():
        out = spec.function(*sample.args, **sample.kwargs)
        return out, torch.autograd.grad(total(out), leaves)

    side = torch.cuda.Stream()  # warm up on a side stream, as torch.cuda.graphs requires
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, grads = step()
    for _ in range(2):
        fresh = spec.make_sample(_shape(spec), torch.float32, "cuda")  # new values each time
        with torch.no_grad():  # every input takes new values, integer ones too
            for given, new in zip(sample.tensors, fresh.tensors, strict=True):
                given.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        want_out, want_grads = step()
        torch.testing.assert_close(out, want_out)
        for got, want in zip(grads, want_grads, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)


def _element_rows(spec, shape, element: int, count: int) -> slice:
    """The slice of the first dimension that holds flat element `element` and `count` after it
    (rows of the last dimension for a row-wise op, elements for a 1-D elementwise one)."""
    per_index = 1
    for size in shape[1:]:
        per_index *= size
    first = element // per_index
    return slice(first, first + max(1, count // per_index))


@pytest.mark.large
@pytest.mark.skipif(HAS_CUDA and torch.cuda.get_device_properties(0).total_memory < 40 * 2**30, reason="40 GB")
def test_more_than_2_31_elements(spec):
    """The op's largest shape (spec.largest_shape: past 2^31 elements) in float16: the pieces at
    the start, across the 2^31 boundary and at the end match the reference."""
    shape = spec.largest_shape
    sample = spec.sample_of_shape(shape, torch.float16, "cuda")
    x = sample.tensors[0]
    assert x.numel() > 2**31, f"{spec.name}: largest_shape {shape} has {x.numel()} elements"
    got = outputs(spec.function(*sample.args, **sample.kwargs))
    if spec.kind == "reduction":  # one result of every element: checked whole, in float64
        wants = outputs(spec.reference_of(sample))
        pieces = [(got, wants)]
    else:
        pieces = []
        for start in (0, 2**31 - 2048, x.numel() - 4096):  # the first, the 2^31 boundary, the last elements
            rows = _element_rows(spec, shape, start, 4096)
            wants = outputs(spec.reference_of(spec.rows_of(sample, rows)))  # per-row inputs sliced with x
            pieces.append(([o[rows] for o in got], wants))
    for outs, wants in pieces:
        for out, want in zip(outs, wants, strict=True):
            torch.testing.assert_close(out.double().cpu(), want, rtol=spec.rtol[torch.float16], atol=1e-3)
