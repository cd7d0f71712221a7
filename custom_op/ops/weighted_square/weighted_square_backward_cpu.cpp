// CPU kernel of custom_op::weighted_square_backward: grad_x = 2 * w * x * grad
// and grad_w = x^2 * grad, in one pass.
#include <torch/csrc/stable/ops.h>

#include <tuple>

#include "common/cpu_loops.h"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/tensor_utils.h"
#include "weighted_square_checks.h"
#include "weighted_square_math.h"

namespace custom_op {
namespace {

using weighted_square_checks::kOp;
namespace math = weighted_square_math;

// kStep: the grad's GradView step (0: one value for every element).
template <typename T, int kStep>
CUSTOM_OP_CPU_CLONES void backward_piece(const T* __restrict g,
                                         const T* __restrict x,
                                         const T* __restrict w,
                                         T* __restrict gx, T* __restrict gw,
                                         int64_t len) {
  using A = acc_t<T>;
  for (int64_t k = 0; k < len; ++k) {
    const A xv = static_cast<A>(x[k]);
    const A gv = static_cast<A>(g[k * kStep]);
    gx[k] = static_cast<T>(math::grad_x(gv, xv, static_cast<A>(w[k])));
    gw[k] = static_cast<T>(math::grad_w(gv, xv));
  }
}

template <typename T, int kStep>
void backward_steps(const T* g, const T* x, const T* w, T* gx, T* gw,
                    int64_t n) {
  torch::stable::parallel_for(0, n, cpu::kGrainSize, [&](int64_t b, int64_t e) {
    backward_piece<T, kStep>(g + b * kStep, x + b, w + b, gx + b, gw + b,
                             e - b);
  });
}

template <typename T>
void backward_typed(const GradView& grad, const Tensor& x, const Tensor& w,
                    Tensor& gx, Tensor& gw) {
  const T* g = cdata<T>(grad.data);
  if (grad.step == 0) {
    backward_steps<T, 0>(g, cdata<T>(x), cdata<T>(w), mdata<T>(gx),
                         mdata<T>(gw), x.numel());
  } else {
    backward_steps<T, 1>(g, cdata<T>(x), cdata<T>(w), mdata<T>(gx),
                         mdata<T>(gw), x.numel());
  }
}

std::tuple<Tensor, Tensor> weighted_square_backward_cpu(const Tensor& grad_in,
                                                        const Tensor& x_in,
                                                        const Tensor& w_in) {
  weighted_square_checks::check_backward(grad_in, x_in, w_in);
  const GradView grad = grad_view(grad_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  const int64_t n = x.numel();
  if (n == 0) return {gx, gw};
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    backward_typed<scalar_t>(grad, x, w, gx, gw);
  });
  return {gx, gw};
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("weighted_square_backward", TORCH_BOX(&weighted_square_backward_cpu));
}

}  // namespace custom_op
