// Shared by the out= and in-place variants of every backend: where to compute
// so the result lands in a given tensor.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>

#include "checks.h"
#include "tensor_utils.h"

namespace custom_op {

// Whether a and b share memory in any way other than being the same
// elements (same start, same size): elementwise kernels may write an output
// that is exactly an input, never one that is shifted against it.
inline bool partially_overlaps(const Tensor& a, const Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  const int64_t a_bytes = a.numel() * static_cast<int64_t>(a.element_size());
  const int64_t b_bytes = b.numel() * static_cast<int64_t>(b.element_size());
  const bool disjoint = a0 + a_bytes <= b0 || b0 + b_bytes <= a0;
  const bool same = a0 == b0 && a_bytes == b_bytes;
  return !disjoint && !same;
}

// Runs compute(x_dense, w_dense, y) with y = out itself when out is contiguous
// and safe to write while reading x and w (the in-place case included);
// otherwise computes into a new tensor and copies it into out.
template <typename Compute>
void write_into(Tensor out, const Tensor& x, const Tensor& w,
                const Compute& compute) {
  if (out.numel() == 0) return;
  const Tensor xd = dense(x);
  const Tensor wd = dense(w);
  if (out.is_contiguous() && !partially_overlaps(out, xd) &&
      !partially_overlaps(out, wd)) {
    compute(xd, wd, out);
    return;
  }
  Tensor result = empty_like_with_shape(xd, shape_of(xd));
  compute(xd, wd, result);
  torch::stable::copy_(out, result);
}

}  // namespace custom_op
