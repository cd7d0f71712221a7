#include "weighted_sum_of_squares_weight_form.h"

namespace custom_op::weighted_sum_of_squares {

WeightForm check_inputs(const char* op, const Tensor& x, const Tensor& w) {
  check_pair(op, "x", x, "w", w);
  if (x.dim() == 0) {
    fail(op,
         "argument 'x' must have at least 1 dimension to reduce over its "
         "last one, got a 0-dim tensor of shape []");
  }
  const auto x_shape = shape_of(x);
  const auto w_shape = shape_of(w);
  if (w_shape == x_shape) return WeightForm::Full;
  if (w.dim() == 1 && w_shape[0] == x_shape.back()) {
    return WeightForm::PerFeature;
  }
  fail(op, "argument 'w' must have x's shape " + shape_str(x_shape) +
               " or be 1-D with x.shape[-1] = " +
               std::to_string(x_shape.back()) + " elements, got shape " +
               shape_str(w_shape) + " for x of shape " + shape_str(x_shape));
}

}  // namespace custom_op::weighted_sum_of_squares
