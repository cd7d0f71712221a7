// The input checks of weighted_square, once for the CPU and CUDA kernels.
// Python's fake kernels raise the same messages (custom_op/checks.py).
#pragma once

#include <torch/csrc/stable/tensor.h>

#include "common/checks.h"
#include "common/library.h"

namespace custom_op::weighted_square_checks {

// The name every message gives, for the backward kernels too.
constexpr const char* kOp = CUSTOM_OP_QUALIFIED("weighted_square");

inline void check_forward(const Tensor& x, const Tensor& w) {
  check_pair(kOp, "x", x, "w", w);
  check_like(kOp, "w", w, x, shape_of(x));
}

inline void check_backward(const Tensor& grad, const Tensor& x,
                           const Tensor& w) {
  check_forward(x, w);
  check_like(kOp, "grad", grad, x, shape_of(x));
}

}  // namespace custom_op::weighted_square_checks
