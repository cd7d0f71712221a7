#include "weighted_sum_of_squares_backward_cpu.h"

#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <vector>

#include "common/cpu_loops.h"
#include "common/dispatch.h"
#include "common/tensor_utils.h"

namespace custom_op::cpu {
namespace {

using weighted_sum_of_squares::WeightForm;

// Columns per task when 1-D weight gradients are accumulated.
constexpr int64_t kColumnBlock = 4096;

// g: the row's grad, the same for the whole piece.
template <typename T>
CUSTOM_OP_CPU_CLONES void grad_piece_full(T g, const T* __restrict x,
                                          const T* __restrict w,
                                          T* __restrict gx, T* __restrict gw,
                                          int64_t len) {
  using A = acc_t<T>;
  const A gv = static_cast<A>(g);
  for (int64_t k = 0; k < len; ++k) {
    const A xv = static_cast<A>(x[k]);
    gx[k] = static_cast<T>(A(2) * static_cast<A>(w[k]) * xv * gv);
    gw[k] = static_cast<T>(xv * xv * gv);
  }
}

template <typename T>
CUSTOM_OP_CPU_CLONES void grad_piece_per_feature(
    T g, const T* __restrict x, const T* __restrict w, T* __restrict gx,
    acc_t<T>* __restrict gw_partial, int64_t len) {
  using A = acc_t<T>;
  const A gv = static_cast<A>(g);
  for (int64_t k = 0; k < len; ++k) {
    const A xv = static_cast<A>(x[k]);
    gx[k] = static_cast<T>(A(2) * static_cast<A>(w[k]) * xv * gv);
    gw_partial[k] += xv * xv * gv;
  }
}

// w like x: both gradients are elementwise, grad read once per row piece.
template <typename T>
void grad_full(const T* g, const T* x, const T* w, T* gx, T* gw, int64_t n,
               int64_t cols, int64_t g_step) {
  torch::stable::parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
    for_each_row_piece(b, e, cols, [&](int64_t i, int64_t, int64_t len) {
      grad_piece_full<T>(g[i / cols * g_step], x + i, w + i, gx + i, gw + i,
                         len);
    });
  });
}

// grad_w[j] = sum over rows: each task owns a chunk of rows and a block of
// columns and accumulates into its own partial row; partial rows are summed
// afterwards in a fixed order.
template <typename T>
void grad_per_feature(const T* g, const T* x, const T* w, T* gx, T* gw,
                      int64_t rows, int64_t cols, int64_t g_step) {
  using A = acc_t<T>;
  // A chunk per two threads' worth of work, and none smaller than a task's
  // grain: a small input stays on the calling thread (no pool wake-up).
  const int64_t chunks = std::max<int64_t>(
      1, std::min({rows, 2 * int64_t(torch::stable::get_num_threads()),
                   rows * cols / kGrainSize}));
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const int64_t col_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  std::vector<A> partial(chunks * cols, A(0));
  torch::stable::parallel_for(
      0, chunks * col_blocks, 1, [&](int64_t b, int64_t e) {
        for (int64_t item = b; item < e; ++item) {
          const int64_t c = item / col_blocks;
          const int64_t j0 = (item % col_blocks) * kColumnBlock;
          const int64_t len = std::min(kColumnBlock, cols - j0);
          const int64_t r1 = std::min(rows, (c + 1) * rows_per_chunk);
          for (int64_t r = c * rows_per_chunk; r < r1; ++r) {
            const int64_t i = r * cols + j0;
            grad_piece_per_feature<T>(g[r * g_step], x + i, w + j0, gx + i,
                                      partial.data() + c * cols + j0, len);
          }
        }
      });
  torch::stable::parallel_for(0, cols, kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      A s = 0;
      for (int64_t c = 0; c < chunks; ++c) s += partial[c * cols + j];
      gw[j] = static_cast<T>(s);
    }
  });
}

}  // namespace

std::tuple<Tensor, Tensor> weighted_sum_of_squares_grad(const Tensor& grad_in,
                                                        const Tensor& x_in,
                                                        const Tensor& w_in,
                                                        WeightForm form) {
  const GradView grad = grad_view(grad_in);
  const Tensor& g = grad.data;
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  if (x.numel() == 0) {
    // No rows: a 1-D weight's gradient is an empty sum.
    return {gx, torch::stable::new_zeros(w, shape_of(w))};
  }
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  const RowView v = rows_of(x);
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(
      x.scalar_type(), "weighted_sum_of_squares_grad", [&] {
        const scalar_t* gp = cdata<scalar_t>(g);
        const scalar_t* xp = cdata<scalar_t>(x);
        const scalar_t* wp = cdata<scalar_t>(w);
        scalar_t* gxp = mdata<scalar_t>(gx);
        scalar_t* gwp = mdata<scalar_t>(gw);
        if (form == WeightForm::Full) {
          grad_full<scalar_t>(gp, xp, wp, gxp, gwp, x.numel(), v.cols,
                              grad.step);
        } else {
          grad_per_feature<scalar_t>(gp, xp, wp, gxp, gwp, v.rows, v.cols,
                                     grad.step);
        }
      });
  return {gx, gw};
}

}  // namespace custom_op::cpu
