// The math of rms_norm, once for the CPU and CUDA kernels. A is the
// accumulate type: float for float32, float16 and bfloat16, double for
// float64. inv_cols is 1 / H (0 when H == 0: the mean of nothing is 0).
#pragma once

#include <cmath>

#include "common/dispatch.h"

namespace custom_op::rms_norm_math {

// rstd = 1 / sqrt(mean(x^2) + eps), from sum(x^2) over the row.
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A rstd(A sum_of_squares, A inv_cols, A eps) {
  using std::sqrt;
  return A(1) / sqrt(sum_of_squares * inv_cols + eps);
}

// y = x * rstd * w.
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A forward(A x, A rstd, A w) {
  return x * rstd * w;
}

// grad_x = rstd * g * w - x * coef, with one coef per row:
// coef = rstd^3 / H * sum_k (g * w * x)[k].
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A grad_x_coef(A rstd, A inv_cols, A sum_gwx) {
  return rstd * rstd * rstd * inv_cols * sum_gwx;
}

template <typename A>
CUSTOM_OP_HOST_DEVICE inline A grad_x(A g, A x, A w, A rstd, A coef) {
  return rstd * g * w - x * coef;
}

// One row's term of grad_weight[j] = sum_r g[r, j] * x[r, j] * rstd[r].
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A grad_weight_term(A g, A x, A rstd) {
  return g * x * rstd;
}

}  // namespace custom_op::rms_norm_math
