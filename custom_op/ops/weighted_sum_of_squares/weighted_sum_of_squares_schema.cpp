// Schemas of weighted_sum_of_squares: s = sum_j w_j * x[..., j]^2 over the
// last dimension; shape x.shape[:-1].
#include "common/library.h"

CUSTOM_OP_FRAGMENT(m) {
  m.def("weighted_sum_of_squares(Tensor x, Tensor w) -> Tensor");
  // Fused backward, as weighted_square_backward's (grad is one per row).
  m.def(
      "weighted_sum_of_squares_backward(Tensor grad, Tensor x, Tensor w,"
      " bool deterministic=False) -> (Tensor, Tensor)");
}
