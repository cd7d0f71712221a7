// Schemas of rms_norm: RMSNorm over the last dimension,
// y = x / sqrt(mean(x^2, -1) + eps) * weight. A schema `float` arrives in C++
// as a double; the defaults are the Python API's.
#include "common/library.h"

CUSTOM_OP_FRAGMENT(m) {
  // The public operator has no C++ kernel: Python registers a
  // CompositeImplicitAutograd kernel that calls rms_norm_forward and returns y,
  // so autograd sees rms_norm_forward and rms_norm_backward.
  m.def("rms_norm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor");
  // Returns (y, rstd); rstd = 1 / sqrt(mean(x^2, -1) + eps), x.shape[:-1], in
  // the accumulate dtype (float32, or float64 for float64 x).
  m.def(
      "rms_norm_forward(Tensor x, Tensor weight, float eps=1e-06)"
      " -> (Tensor, Tensor)");
  // Returns (grad_x, grad_weight).
  m.def(
      "rms_norm_backward(Tensor grad, Tensor x, Tensor weight, Tensor rstd)"
      " -> (Tensor, Tensor)");
}
