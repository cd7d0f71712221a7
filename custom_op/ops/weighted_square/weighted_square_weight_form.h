// weighted_square's weight: w has x's shape, or is 1-D with x.shape[-1]
// elements (one weight per feature).
#pragma once

#include "common/checks.h"

namespace custom_op::weighted_square {

enum class WeightForm {
  Full,        // w has x's shape: one weight per element
  PerFeature,  // w is 1-D with x.shape[-1] elements: one weight per feature
};

// Checks x and w for `op`: check_pair, then w's shape. Returns the weight
// form.
WeightForm check_inputs(const char* op, const Tensor& x, const Tensor& w);

}  // namespace custom_op::weighted_square
