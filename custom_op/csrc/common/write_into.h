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

// Runs compute(dense(inputs)..., y) with y = out itself when out is
// contiguous and safe to write while reading the inputs (the in-place case
// included); otherwise computes into a new tensor of out's shape and copies
// it into out. The caller has checked out's shape, dtype and device.
template <typename Compute, typename... Inputs>
void write_into(Tensor out, const Compute& compute, const Inputs&... inputs) {
  if (out.numel() == 0) return;
  auto run = [&](const auto&... dense_inputs) {
    if (out.is_contiguous() &&
        (!partially_overlaps(out, dense_inputs) && ...)) {
      compute(dense_inputs..., out);
      return;
    }
    Tensor result = empty_like_with_shape(out, shape_of(out));
    compute(dense_inputs..., result);
    torch::stable::copy_(out, result);
  };
  run(dense(inputs)...);
}

}  // namespace custom_op
