// Every operator schema of the library, defined once. Kernels register
// themselves per backend next to their code (CUSTOM_OP_IMPL).
#include "common/library.h"

CUSTOM_OP_LIBRARY(m) {
  // y = w * x^2, elementwise. w has x's shape or is 1-D with x.shape[-1]
  // elements.
  m.def("weighted_square(Tensor x, Tensor w) -> Tensor");
  // The same into a given tensor, and in place (x becomes w * x^2): no new
  // memory for the result. They return nothing, as PyTorch's functionalization
  // (torch.compile) requires of custom mutating operators; the Python API
  // returns the mutated tensor.
  m.def("weighted_square.out(Tensor x, Tensor w, *, Tensor(a!) out) -> ()");
  m.def("weighted_square_(Tensor(a!) x, Tensor w) -> ()");
  // s = sum_j w_j * x[..., j]^2 over the last dimension; shape x.shape[:-1].
  m.def("weighted_sum_of_squares(Tensor x, Tensor w) -> Tensor");

  // Fused backward kernels: one pass reads grad, x and w and writes
  // (grad_x, grad_w). deterministic: a 1-D w's gradient is summed over rows
  // in a fixed order (bitwise the same every run) instead of the faster
  // order the GPU's blocks take; the Python API passes
  // torch.are_deterministic_algorithms_enabled().
  m.def(
      "weighted_square_backward(Tensor grad, Tensor x, Tensor w,"
      " bool deterministic=False) -> (Tensor, Tensor)");
  m.def(
      "weighted_sum_of_squares_backward(Tensor grad, Tensor x, Tensor w,"
      " bool deterministic=False) -> (Tensor, Tensor)");
}
