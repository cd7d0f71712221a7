// CPU kernel of custom_op::weighted_square: y = w * x^2.
#include <torch/csrc/stable/ops.h>

#include "common/cpu_loops.h"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/tensor_utils.h"
#include "weighted_square_checks.h"
#include "weighted_square_math.h"

namespace custom_op {
namespace {

using weighted_square_checks::kOp;

template <typename T>
CUSTOM_OP_CPU_CLONES void forward_piece(const T* __restrict x,
                                        const T* __restrict w, T* __restrict y,
                                        int64_t len) {
  using A = acc_t<T>;
  for (int64_t k = 0; k < len; ++k) {
    y[k] = static_cast<T>(weighted_square_math::forward(static_cast<A>(x[k]),
                                                        static_cast<A>(w[k])));
  }
}

Tensor weighted_square_cpu(const Tensor& x_in, const Tensor& w_in) {
  weighted_square_checks::check_forward(x_in, w_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor y = empty_like_with_shape(x, shape_of(x));
  const int64_t n = x.numel();
  if (n == 0) return y;
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    const scalar_t* xp = cdata<scalar_t>(x);
    const scalar_t* wp = cdata<scalar_t>(w);
    scalar_t* yp = mdata<scalar_t>(y);
    torch::stable::parallel_for(
        0, n, cpu::kGrainSize, [&](int64_t begin, int64_t end) {
          forward_piece(xp + begin, wp + begin, yp + begin, end - begin);
        });
  });
  return y;
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("weighted_square", TORCH_BOX(&weighted_square_cpu));
}

}  // namespace custom_op
