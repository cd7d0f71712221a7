// CPU kernels of cross_entropy's forward: the loss and lse, a row at a time
// (long rows split into parts on the shape alone).
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/checks.h"
#include "common/cpu_convert.h"
#include "common/cpu_exp.h"
#include "common/cpu_loops.h"
#include "common/cpu_softmax.h"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/softmax.h"
#include "common/tensor_utils.h"
#include "cross_entropy_checks.h"
#include "cross_entropy_math.h"

namespace custom_op {
namespace {

namespace math = cross_entropy_math;
using cross_entropy_checks::kOp;
using math::Label;

// Up to kMaxSplitPieces / 2 rows of at least 2 * kMinSplitCols are split
// into parts of at least kMinSplitCols, kMaxSplitPieces parts in all at most,
// so that every thread gets work; the split depends on the shape alone, so the
// result is the same bits whatever the number of threads.
constexpr int64_t kMinSplitCols = 16384;
constexpr int64_t kMaxSplitPieces = 64;

// Row r's lse and loss, from the softmax piece of the whole row at xr.
template <typename T>
inline void write_row(const T* xr, SoftmaxSum<acc_t<T>> s, int64_t r, int64_t y,
                      int64_t cols, int64_t ignore_index, acc_t<T>* loss,
                      acc_t<T>* lse) {
  using A = acc_t<T>;
  const A l = s.log_sum_exp();
  lse[r] = l;
  loss[r] = math::classify(y, cols, ignore_index) == Label::kClass
                ? math::loss(l, static_cast<A>(xr[y]))
                : A(0);
}

// The softmax piece of each of `items` (row, part) pairs: part p of a row
// holds columns [p * part_cols, (p + 1) * part_cols).
template <typename T>
CUSTOM_OP_CPU_CLONES void softmax_parts(const T* __restrict x,
                                        SoftmaxSum<acc_t<T>>* __restrict out,
                                        int64_t i0, int64_t i1, int64_t parts,
                                        int64_t part_cols, int64_t cols) {
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t r = i / parts;
    const int64_t c0 = (i % parts) * part_cols;
    const int64_t len = std::max<int64_t>(0, std::min(part_cols, cols - c0));
    out[i] = cpu::softmax_sum(x + r * cols + c0, len);
  }
}

// Rows [r0, r1): lse and loss.
template <typename T>
CUSTOM_OP_CPU_CLONES void forward_rows(const T* __restrict x,
                                       const int64_t* __restrict labels,
                                       acc_t<T>* __restrict loss,
                                       acc_t<T>* __restrict lse, int64_t r0,
                                       int64_t r1, int64_t cols,
                                       int64_t ignore_index) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * cols;
    write_row(xr, cpu::softmax_sum(xr, cols), r, labels[r], cols, ignore_index,
              loss, lse);
  }
}

template <typename T>
void forward_kernel(const T* x, const int64_t* labels, acc_t<T>* loss,
                    acc_t<T>* lse, RowView v, int64_t ignore_index) {
  using A = acc_t<T>;
  const int64_t parts =
      v.rows * 2 > kMaxSplitPieces || v.cols < 2 * kMinSplitCols
          ? 1
          : std::min(kMaxSplitPieces / v.rows, v.cols / kMinSplitCols);
  if (parts == 1) {
    const int64_t grain = cpu::row_grain(v.cols);
    torch::stable::parallel_for(0, v.rows, grain, [&](int64_t r0, int64_t r1) {
      forward_rows(x, labels, loss, lse, r0, r1, v.cols, ignore_index);
    });
    return;
  }
  const int64_t part_cols = (v.cols + parts - 1) / parts;
  std::vector<SoftmaxSum<A>> partial(v.rows * parts);
  torch::stable::parallel_for(0, v.rows * parts, 1, [&](int64_t b, int64_t e) {
    softmax_parts(x, partial.data(), b, e, parts, part_cols, v.cols);
  });
  for (int64_t r = 0; r < v.rows; ++r) {
    SoftmaxSum<A> s = partial[r * parts];
    for (int64_t p = 1; p < parts; ++p) s = merge(s, partial[r * parts + p]);
    write_row(x + r * v.cols, s, r, labels[r], v.cols, ignore_index, loss, lse);
  }
}

std::tuple<Tensor, Tensor> cross_entropy_forward_cpu(const Tensor& logits_in,
                                                     const Tensor& labels_in,
                                                     int64_t ignore_index) {
  cross_entropy_checks::check_inputs(logits_in, labels_in);
  const Tensor x = dense(logits_in);
  const Tensor labels = dense(labels_in);
  const RowView v = rows_of(x);
  cross_entropy_checks::check_labels_in_range(cdata<int64_t>(labels), v.rows,
                                              v.cols, ignore_index);
  Tensor loss = empty_acc_with_shape(x, {v.rows});
  Tensor lse = empty_acc_with_shape(x, {v.rows});
  if (v.rows == 0) return {loss, lse};
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    using A = acc_t<scalar_t>;
    forward_kernel(cdata<scalar_t>(x), cdata<int64_t>(labels), mdata<A>(loss),
                   mdata<A>(lse), v, ignore_index);
  });
  return {loss, lse};
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("cross_entropy_forward", TORCH_BOX(&cross_entropy_forward_cpu));
}

}  // namespace custom_op
