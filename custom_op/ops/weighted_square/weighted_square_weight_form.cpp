#include "weighted_square_weight_form.h"

namespace custom_op::weighted_square {

WeightForm check_inputs(const char* op, const Tensor& x, const Tensor& w) {
  check_pair(op, "x", x, "w", w);
  const auto x_shape = shape_of(x);
  const auto w_shape = shape_of(w);
  if (w_shape == x_shape) return WeightForm::Full;
  if (x.dim() >= 1 && w.dim() == 1 && w_shape[0] == x_shape.back()) {
    return WeightForm::PerFeature;
  }
  std::string s = "argument 'w' must have x's shape " + shape_str(x_shape);
  if (x.dim() >= 1) {
    s += " or be 1-D with x.shape[-1] = " + std::to_string(x_shape.back()) +
         " elements";
  }
  s += ", got shape " + shape_str(w_shape) + " for x of shape " +
       shape_str(x_shape);
  fail(op, s);
}

}  // namespace custom_op::weighted_square
