#include "weighted_square_backward_cpu.h"

#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "common/cpu_loops.h"
#include "common/dispatch.h"
#include "common/tensor_utils.h"

namespace custom_op::cpu {
namespace {

using weighted_square::WeightForm;

// Columns per task when 1-D weight gradients are accumulated.
constexpr int64_t kColumnBlock = 4096;

// kStep: the grad's GradView step (0: one value for every element).
template <typename T, int kStep>
CUSTOM_OP_CPU_CLONES void grad_piece_full(const T* __restrict g,
                                          const T* __restrict x,
                                          const T* __restrict w,
                                          T* __restrict gx, T* __restrict gw,
                                          int64_t len) {
  using A = acc_t<T>;
  for (int64_t k = 0; k < len; ++k) {
    const A xv = static_cast<A>(x[k]);
    const A gv = static_cast<A>(g[k * kStep]);
    gx[k] = static_cast<T>(A(2) * static_cast<A>(w[k]) * xv * gv);
    gw[k] = static_cast<T>(xv * xv * gv);
  }
}

template <typename T, int kStep>
CUSTOM_OP_CPU_CLONES void grad_piece_per_feature(
    const T* __restrict g, const T* __restrict x, const T* __restrict w,
    T* __restrict gx, acc_t<T>* __restrict gw_partial, int64_t len) {
  using A = acc_t<T>;
  for (int64_t k = 0; k < len; ++k) {
    const A xv = static_cast<A>(x[k]);
    const A gv = static_cast<A>(g[k * kStep]);
    gx[k] = static_cast<T>(A(2) * static_cast<A>(w[k]) * xv * gv);
    gw_partial[k] += xv * xv * gv;
  }
}

// w like x: both gradients are elementwise.
template <typename T, int kStep>
void grad_full(const T* g, const T* x, const T* w, T* gx, T* gw, int64_t n) {
  torch::stable::parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
    grad_piece_full<T, kStep>(g + b * kStep, x + b, w + b, gx + b, gw + b,
                              e - b);
  });
}

// grad_w[j] = sum over rows: each task owns a chunk of rows and a block of
// columns and accumulates into its own partial row; partial rows are summed
// afterwards in a fixed order.
template <typename T, int kStep>
void grad_per_feature(const T* g, const T* x, const T* w, T* gx, T* gw,
                      int64_t rows, int64_t cols) {
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
            grad_piece_per_feature<T, kStep>(
                g + i * kStep, x + i, w + j0, gx + i,
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

template <typename T>
void grad_typed(const GradView& grad, const Tensor& x, const Tensor& w,
                Tensor& gx, Tensor& gw, WeightForm form) {
  const T* gp = cdata<T>(grad.data);
  const T* xp = cdata<T>(x);
  const T* wp = cdata<T>(w);
  T* gxp = mdata<T>(gx);
  T* gwp = mdata<T>(gw);
  auto run = [&](auto step) {
    constexpr int kStep = decltype(step)::value;
    if (form == WeightForm::Full) {
      grad_full<T, kStep>(gp, xp, wp, gxp, gwp, x.numel());
    } else {
      const RowView v = rows_of(x);
      grad_per_feature<T, kStep>(gp, xp, wp, gxp, gwp, v.rows, v.cols);
    }
  };
  if (grad.step == 0) {
    run(std::integral_constant<int, 0>());
  } else {
    run(std::integral_constant<int, 1>());
  }
}

}  // namespace

std::tuple<Tensor, Tensor> weighted_square_grad(const Tensor& grad_in,
                                                const Tensor& x_in,
                                                const Tensor& w_in,
                                                WeightForm form) {
  const GradView grad = grad_view(grad_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  if (x.numel() == 0) {
    // No rows: a 1-D weight's gradient is an empty sum.
    return {gx, torch::stable::new_zeros(w, shape_of(w))};
  }
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(
      x.scalar_type(), "weighted_square_grad",
      [&] { grad_typed<scalar_t>(grad, x, w, gx, gw, form); });
  return {gx, gw};
}

}  // namespace custom_op::cpu
