// Schemas of weighted_square: y = w * x^2, elementwise. w has x's shape or is
// 1-D with x.shape[-1] elements.
#include "common/library.h"

CUSTOM_OP_FRAGMENT(m) {
  m.def("weighted_square(Tensor x, Tensor w) -> Tensor");
  // The same into a given tensor, and in place (x becomes w * x^2): no new
  // memory for the result. They return nothing, as PyTorch's functionalization
  // (torch.compile) requires of custom mutating operators; the Python API
  // returns the mutated tensor.
  m.def("weighted_square.out(Tensor x, Tensor w, *, Tensor(a!) out) -> ()");
  m.def("weighted_square_(Tensor(a!) x, Tensor w) -> ()");
  // Fused backward: one pass reads grad, x and w and writes (grad_x, grad_w).
  // deterministic: a 1-D w's gradient is summed over rows in a fixed order
  // (bitwise the same every run) instead of the faster order the GPU's blocks
  // take; the Python API passes torch.are_deterministic_algorithms_enabled().
  m.def(
      "weighted_square_backward(Tensor grad, Tensor x, Tensor w,"
      " bool deterministic=False) -> (Tensor, Tensor)");
}
