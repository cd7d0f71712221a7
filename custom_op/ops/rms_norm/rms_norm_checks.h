// The input checks of rms_norm, once for the CPU and CUDA kernels. Python's
// fake kernels raise the same messages (custom_op/checks.py).
#pragma once

#include <torch/csrc/stable/tensor.h>

#include "common/checks.h"
#include "common/library.h"

namespace custom_op::rms_norm_checks {

// The name every message gives, for the _forward and _backward kernels too.
constexpr const char* kOp = CUSTOM_OP_QUALIFIED("rms_norm");

inline void check_forward(const Tensor& x, const Tensor& weight, double eps) {
  check_pair(kOp, "x", x, "weight", weight);
  check_rows(kOp, "x", x, "normalize");
  check_last_dim_weight(kOp, "x", x, "weight", weight);
  check_finite_nonnegative(kOp, "eps", eps);
}

inline void check_backward(const Tensor& grad, const Tensor& x,
                           const Tensor& weight, const Tensor& rstd) {
  check_pair(kOp, "x", x, "weight", weight);
  check_rows(kOp, "x", x, "normalize");
  check_last_dim_weight(kOp, "x", x, "weight", weight);
  check_like(kOp, "grad", grad, x, shape_of(x));
  check_acc_like(kOp, "rstd", rstd, x, shape_without_last_dim(x));
}

}  // namespace custom_op::rms_norm_checks
