// CPU kernels of custom_op::weighted_sum_of_squares: s = sum_j w_j x[..., j]^2.
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <vector>

#include "common/cpu_loops.h"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/tensor_utils.h"
#include "weighted_sum_of_squares_backward_cpu.h"
#include "weighted_sum_of_squares_weight_form.h"

namespace custom_op {
namespace {

using weighted_sum_of_squares::check_inputs;
using weighted_sum_of_squares::WeightForm;

constexpr const char* kOp = CUSTOM_OP_QUALIFIED("weighted_sum_of_squares");

// Rows shorter than this are never split across threads.
constexpr int64_t kMinSplitCols = 16384;

// sum_k w[k] * x[k]^2 in the accumulation type. kLanes independent partial
// sums turn the reduction into element-wise work the vectorizer handles, and
// keep the summation order fixed (deterministic results).
template <typename T>
CUSTOM_OP_CPU_CLONES acc_t<T> weighted_sum_of_squares_row(const T* __restrict x,
                                                          const T* __restrict w,
                                                          int64_t len) {
  using A = acc_t<T>;
  constexpr int kLanes = 64 / sizeof(A);
  A lanes[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= len; k += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const A xv = static_cast<A>(x[k + l]);
      lanes[l] += static_cast<A>(w[k + l]) * xv * xv;
    }
  }
  A tail = 0;
  for (; k < len; ++k) {
    const A xv = static_cast<A>(x[k]);
    tail += static_cast<A>(w[k]) * xv * xv;
  }
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0] + tail;
}

template <typename T>
void weighted_sum_of_squares_kernel(const T* x, const T* w, T* out,
                                    int64_t rows, int64_t cols,
                                    WeightForm form) {
  using A = acc_t<T>;
  const int64_t w_row_stride = form == WeightForm::Full ? cols : 0;
  // Few long rows: split each row so every thread gets work.
  const int64_t threads = torch::stable::get_num_threads();
  int64_t splits = 1;
  if (rows < threads && cols >= 2 * kMinSplitCols) {
    splits = std::min((threads + rows - 1) / rows, cols / kMinSplitCols);
  }
  if (splits == 1) {
    const int64_t grain = std::max<int64_t>(1, cpu::kGrainSize / cols);
    torch::stable::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        out[r] = static_cast<T>(weighted_sum_of_squares_row(
            x + r * cols, w + r * w_row_stride, cols));
      }
    });
    return;
  }
  const int64_t chunk = (cols + splits - 1) / splits;
  std::vector<A> partial(rows * splits);
  torch::stable::parallel_for(0, rows * splits, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t r = item / splits;
      const int64_t c0 = (item % splits) * chunk;
      const int64_t len = std::max<int64_t>(0, std::min(chunk, cols - c0));
      partial[item] = weighted_sum_of_squares_row(
          x + r * cols + c0, w + r * w_row_stride + c0, len);
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    A s = 0;
    for (int64_t k = 0; k < splits; ++k) s += partial[r * splits + k];
    out[r] = static_cast<T>(s);
  }
}

Tensor weighted_sum_of_squares_cpu(const Tensor& x_in, const Tensor& w_in) {
  const WeightForm form = check_inputs(kOp, x_in, w_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  const auto out_shape = shape_without_last_dim(x);
  const RowView v = rows_of(x);
  if (v.cols == 0) return torch::stable::new_zeros(x, out_shape);
  Tensor out = empty_like_with_shape(x, out_shape);
  if (v.rows == 0) return out;
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    weighted_sum_of_squares_kernel(cdata<scalar_t>(x), cdata<scalar_t>(w),
                                   mdata<scalar_t>(out), v.rows, v.cols, form);
  });
  return out;
}

std::tuple<Tensor, Tensor> weighted_sum_of_squares_backward_cpu(
    const Tensor& grad, const Tensor& x, const Tensor& w,
    bool /*deterministic*/) {
  // The CPU kernels always sum in a fixed order.
  const WeightForm form = check_inputs(kOp, x, w);
  check_like(kOp, "grad", grad, x, shape_without_last_dim(x));
  return cpu::weighted_sum_of_squares_grad(grad, x, w, form);
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("weighted_sum_of_squares", TORCH_BOX(&weighted_sum_of_squares_cpu));
  m.impl("weighted_sum_of_squares_backward",
         TORCH_BOX(&weighted_sum_of_squares_backward_cpu));
}

}  // namespace custom_op
