// CPU kernels of rms_norm's forward: y and the per-row rstd, rows spread over
// parallel_for.
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "common/checks.h"
#include "common/cpu_loops.h"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/tensor_utils.h"
#include "rms_norm_checks.h"
#include "rms_norm_math.h"

namespace custom_op {
namespace {

namespace math = rms_norm_math;
using rms_norm_checks::kOp;

// Rows [r0, r1): rstd from the row's sum of squares, then y.
template <typename T>
CUSTOM_OP_CPU_CLONES void forward_rows(const T* __restrict x,
                                       const T* __restrict w, T* __restrict y,
                                       acc_t<T>* __restrict rstd, int64_t r0,
                                       int64_t r1, int64_t cols,
                                       acc_t<T> inv_cols, acc_t<T> eps) {
  using A = acc_t<T>;
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const A rs = math::rstd(cpu::sum_of_squares(xr, cols), inv_cols, eps);
    rstd[r] = rs;
    for (int64_t j = 0; j < cols; ++j) {
      yr[j] = static_cast<T>(
          math::forward(static_cast<A>(xr[j]), rs, static_cast<A>(w[j])));
    }
  }
}

template <typename T>
void forward_kernel(const T* x, const T* w, T* y, acc_t<T>* rstd, RowView v,
                    double eps) {
  using A = acc_t<T>;
  const A inv_cols = v.cols > 0 ? A(1) / A(v.cols) : A(0);
  torch::stable::parallel_for(
      0, v.rows, cpu::row_grain(v.cols), [&](int64_t r0, int64_t r1) {
        forward_rows(x, w, y, rstd, r0, r1, v.cols, inv_cols, A(eps));
      });
}

std::tuple<Tensor, Tensor> rms_norm_forward_cpu(const Tensor& x_in,
                                                const Tensor& weight_in,
                                                double eps) {
  rms_norm_checks::check_forward(x_in, weight_in, eps);
  const Tensor x = dense(x_in);
  const Tensor w = dense(weight_in);
  Tensor y = empty_like_with_shape(x, shape_of(x));
  Tensor rstd = empty_acc_with_shape(x, shape_without_last_dim(x));
  const RowView v = rows_of(x);
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    forward_kernel(cdata<scalar_t>(x), cdata<scalar_t>(w), mdata<scalar_t>(y),
                   mdata<acc_t<scalar_t>>(rstd), v, eps);
  });
  return {y, rstd};
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("rms_norm_forward", TORCH_BOX(&rms_norm_forward_cpu));
}

}  // namespace custom_op
