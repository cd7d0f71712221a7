// The math of cross_entropy, once for the CPU and CUDA kernels. A is the
// accumulate type: float for float32, float16 and bfloat16, double for
// float64. Per row of logits x with label y and lse = log(sum_j exp(x_j)):
//   loss = lse - x_y,   d loss / d x_j = exp(x_j - lse) - (j == y),
// both 0 where y is ignore_index.
#pragma once

#include <cstdint>

#include "common/dispatch.h"

namespace custom_op::cross_entropy_math {

enum class Label { kClass, kIgnored, kOutOfRange };

// A label equal to ignore_index is ignored even when it is a class index.
CUSTOM_OP_HOST_DEVICE inline Label classify(int64_t label, int64_t classes,
                                            int64_t ignore_index) {
  if (label == ignore_index) return Label::kIgnored;
  return label >= 0 && label < classes ? Label::kClass : Label::kOutOfRange;
}

template <typename A>
CUSTOM_OP_HOST_DEVICE inline A loss(A lse, A x_label) {
  return lse - x_label;
}

// grad * (softmax_j - onehot_j), softmax_j = exp(x_j - lse) given as p.
template <typename A>
CUSTOM_OP_HOST_DEVICE inline A grad_logit(A grad, A p, bool is_label) {
  return grad * (is_label ? p - A(1) : p);
}

}  // namespace custom_op::cross_entropy_math
