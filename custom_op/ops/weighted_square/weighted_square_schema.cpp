// Schemas of weighted_square: y = w * x^2, elementwise, w of x's shape.
#include "common/library.h"

CUSTOM_OP_FRAGMENT(m) {
  m.def("weighted_square(Tensor x, Tensor w) -> Tensor");
  // One pass over grad, x and w: returns (grad_x, grad_w).
  m.def(
      "weighted_square_backward(Tensor grad, Tensor x, Tensor w)"
      " -> (Tensor, Tensor)");
}
