"""Every operator of the registry on the GPU: PyTorch's current stream, CUDA graph capture and
replay of forward and backward, and more than 2^31 elements (the shape its spec's kind gives)."""

from __future__ import annotations

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")]


def _sample(spec, dtype=torch.float32):
    return spec.make_sample(spec.bench_shapes("cuda", True)[-1], dtype, "cuda")


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
    sample = _sample(spec).detached(requires_grad=True)
    leaves = [a for a in sample.args if isinstance(a, torch.Tensor)]

    def step():
        out = spec.function(*sample.args, **sample.kwargs)
        return out, torch.autograd.grad(out.sum(), leaves)

    side = torch.cuda.Stream()  # warm up on a side stream, as torch.cuda.graphs requires
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, grads = step()
    for _ in range(2):
        fresh = _sample(spec)
        with torch.no_grad():
            for leaf, new in zip(leaves, fresh.tensors, strict=True):
                leaf.copy_(new)
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
    sample = spec.make_sample(shape, torch.float16, "cuda")
    x = sample.tensors[0]
    assert x.numel() > 2**31, f"{spec.name}: largest_shape {shape} has {x.numel()} elements"
    out = spec.function(*sample.args, **sample.kwargs)
    n = x.numel()
    for start in (0, 2**31 - 2048, n - 4096):  # the first, the 2^31 boundary, the last elements
        rows = _element_rows(spec, shape, start, 4096)
        # inputs of x's shape are sliced like x; the others (a weight per feature) are whole
        piece = [a[rows].double() if isinstance(a, torch.Tensor) and a.shape == x.shape else a for a in sample.args]
        piece = [a.double() if isinstance(a, torch.Tensor) else a for a in piece]
        want = spec.reference(*piece, **sample.kwargs)
        torch.testing.assert_close(out[rows].double(), want, rtol=spec.rtol[torch.float16], atol=1e-3)
