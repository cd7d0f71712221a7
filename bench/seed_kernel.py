"""The seed article's naive CUDA kernel for y = w * x^2 (fp32, int indexing, default stream),
compiled on first use: the baseline a custom kernel is usually first written as."""

from __future__ import annotations

import functools

import torch
import torch.utils.cpp_extension

_SOURCE = r"""
#include <torch/extension.h>

__global__ void weighted_square_kernel(const float* x, const float* w, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = w[i] * x[i] * x[i];
}

torch::Tensor weighted_square(torch::Tensor x, torch::Tensor w) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  int threads = 256;
  weighted_square_kernel<<<(n + threads - 1) / threads, threads>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""


@functools.cache
def _module():
    return torch.utils.cpp_extension.load_inline(
        name="seed_weighted_square",
        cpp_sources="torch::Tensor weighted_square(torch::Tensor x, torch::Tensor w);",
        cuda_sources=_SOURCE,
        functions=["weighted_square"],
        extra_cuda_cflags=["-O3"],
    )


def seed_weighted_square(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return _module().weighted_square(x, w)
