// CPU kernels of rms_norm's fused backward: grad_x, and grad_weight summed per
// fixed chunk of rows, then over the chunks in order.
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

// grad_weight's partial sums: at most this many chunks of rows, and at most
// this many elements in all (chunks * H).
constexpr int64_t kMaxChunks = 256;
constexpr int64_t kMaxPartialElements = int64_t(1) << 22;

// Rows [r0, r1): grad_x, and their grad_weight terms added to gw_partial.
// kStep: the grad's GradView step (0: one value, read in place).
template <int kStep, typename T>
CUSTOM_OP_CPU_CLONES void backward_rows(
    const T* __restrict g, const T* __restrict x, const T* __restrict w,
    const acc_t<T>* __restrict rstd, T* __restrict gx,
    acc_t<T>* __restrict gw_partial, int64_t r0, int64_t r1, int64_t cols,
    acc_t<T> inv_cols) {
  using A = acc_t<T>;
  for (int64_t r = r0; r < r1; ++r) {
    const T* gr = g + r * cols * kStep;
    const T* xr = x + r * cols;
    T* gxr = gx + r * cols;
    const A sum_gwx = cpu::sum_lanes<A>(cols, [&](int64_t k) {
      return static_cast<A>(gr[k * kStep]) * static_cast<A>(w[k]) *
             static_cast<A>(xr[k]);
    });
    const A rs = rstd[r];
    const A coef = math::grad_x_coef(rs, inv_cols, sum_gwx);
    for (int64_t j = 0; j < cols; ++j) {
      const A gv = static_cast<A>(gr[j * kStep]);
      const A xv = static_cast<A>(xr[j]);
      gxr[j] =
          static_cast<T>(math::grad_x(gv, xv, static_cast<A>(w[j]), rs, coef));
      gw_partial[j] += math::grad_weight_term(gv, xv, rs);
    }
  }
}

// Columns [j0, j1): partial row 0 += rows 1 .. chunks - 1, in that order,
// then grad_weight = row 0.
template <typename T>
CUSTOM_OP_CPU_CLONES void sum_chunks(acc_t<T>* __restrict partial,
                                     T* __restrict gw, int64_t chunks,
                                     int64_t cols, int64_t j0, int64_t j1) {
  for (int64_t c = 1; c < chunks; ++c) {
    const acc_t<T>* __restrict part = partial + c * cols;
    for (int64_t j = j0; j < j1; ++j) partial[j] += part[j];
  }
  for (int64_t j = j0; j < j1; ++j) gw[j] = static_cast<T>(partial[j]);
}

// grad_weight sums over rows: the rows are split into chunks whose number
// depends on the shape alone, each chunk sums its rows into its own partial
// row, and the partial rows are added in a fixed order. The result is the
// same bits whatever the number of threads.
template <typename T>
void backward_kernel(const T* g, int64_t g_step, const T* x, const T* w,
                     const acc_t<T>* rstd, T* gx, T* gw, RowView v) {
  using A = acc_t<T>;
  const int64_t chunks = std::max<int64_t>(
      1, std::min({v.rows, kMaxChunks, kMaxPartialElements / v.cols,
                   (v.rows * v.cols + cpu::kGrainSize - 1) / cpu::kGrainSize}));
  const int64_t rows_per_chunk = (v.rows + chunks - 1) / chunks;
  std::vector<A> partial(chunks * v.cols, A(0));
  const A inv_cols = A(1) / A(v.cols);
  torch::stable::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = std::min(v.rows, c * rows_per_chunk);
      const int64_t r1 = std::min(v.rows, r0 + rows_per_chunk);
      A* part = partial.data() + c * v.cols;
      if (g_step == 0) {
        backward_rows<0>(g, x, w, rstd, gx, part, r0, r1, v.cols, inv_cols);
      } else {
        backward_rows<1>(g, x, w, rstd, gx, part, r0, r1, v.cols, inv_cols);
      }
    }
  });
  torch::stable::parallel_for(
      0, v.cols, cpu::kGrainSize / chunks + 1, [&](int64_t j0, int64_t j1) {
        sum_chunks(partial.data(), gw, chunks, v.cols, j0, j1);
      });
}

std::tuple<Tensor, Tensor> rms_norm_backward_cpu(const Tensor& grad_in,
                                                 const Tensor& x_in,
                                                 const Tensor& weight_in,
                                                 const Tensor& rstd_in) {
  rms_norm_checks::check_backward(grad_in, x_in, weight_in, rstd_in);
  const GradView g = grad_view(grad_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(weight_in);
  const Tensor rstd = dense(rstd_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  const RowView v = rows_of(x);
  if (v.rows == 0 || v.cols == 0) {
    return {gx, torch::stable::new_zeros(w, shape_of(w))};  // an empty sum
  }
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    backward_kernel(cdata<scalar_t>(g.data), g.step, cdata<scalar_t>(x),
                    cdata<scalar_t>(w), cdata<acc_t<scalar_t>>(rstd),
                    mdata<scalar_t>(gx), mdata<scalar_t>(gw), v);
  });
  return {gx, gw};
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("rms_norm_backward", TORCH_BOX(&rms_norm_backward_cpu));
}

}  // namespace custom_op
