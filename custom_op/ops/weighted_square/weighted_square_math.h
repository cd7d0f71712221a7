// The math of weighted_square, once for the CPU and CUDA kernels. A is the
// accumulate type: float for float32, float16 and bfloat16, double for
// float64.
#pragma once

#include "common/dispatch.h"

namespace custom_op::weighted_square_math {

// y = w * x^2.
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A forward(A x, A w) {
  return w * x * x;
}

// grad_x = 2 * w * x * grad.
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A grad_x(A g, A x, A w) {
  return A(2) * w * x * g;
}

// grad_w = x^2 * grad.
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A grad_w(A g, A x) {
  return x * x * g;
}

}  // namespace custom_op::weighted_square_math
