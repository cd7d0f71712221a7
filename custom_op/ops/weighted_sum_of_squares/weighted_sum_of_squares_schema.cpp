// Schemas of weighted_sum_of_squares: s = sum_j w_j * x[..., j]^2 over the
// last dimension; shape x.shape[:-1].
#include "common/library.h"

CUSTOM_OP_FRAGMENT(m) {
  m.def("weighted_sum_of_squares(Tensor x, Tensor w) -> Tensor");
  // Fused backward: one pass reads grad (one value per row), x and w and
  // writes (grad_x, grad_w). deterministic: a 1-D w's gradient is summed over
  // rows in a fixed order (bitwise the same every run) instead of the faster
  // order the GPU's blocks take; the Python API passes
  // torch.are_deterministic_algorithms_enabled().
  m.def(
      "weighted_sum_of_squares_backward(Tensor grad, Tensor x, Tensor w,"
      " bool deterministic=False) -> (Tensor, Tensor)");
}
