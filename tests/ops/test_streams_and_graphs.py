"""Every operator of the registry on the GPU: PyTorch's current stream, CUDA graph capture and
replay of forward and backward, and (elementwise ops) more than 2^31 elements."""

from __future__ import annotations

import pytest
import torch
from conftest import HAS_CUDA

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


@pytest.mark.large
@pytest.mark.skipif(HAS_CUDA and torch.cuda.get_device_properties(0).total_memory < 40 * 2**30, reason="40 GB")
def test_more_than_2_31_elements(spec):
    n = 2**31 + 4099  # past int32 indexing, with a scalar tail
    sample = spec.make_sample((n,), torch.float16, "cuda")
    out = spec.function(*sample.args, **sample.kwargs)
    if out.shape != sample.tensors[0].shape:
        pytest.skip(f"{spec.name} is not elementwise")
    for start in (0, 2**31 - 2048, n - 4096):  # the first, the 2^31 boundary, the last elements
        piece = [a[start : start + 4096].double() if isinstance(a, torch.Tensor) else a for a in sample.args]
        want = spec.reference(*piece, **sample.kwargs)
        torch.testing.assert_close(out[start : start + 4096].double(), want, rtol=spec.rtol[torch.float16], atol=1e-3)
