// CPU kernels of cross_entropy's backward: softmax - onehot, scaled by the
// row's grad, over flat ranges.
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

// One piece of a row: columns [j0, j0 + len) of x and grad_x, for a row
// whose label is a class (`y`), grad g and lse l; kSoftmaxPiece elements at a
// time, half types converted to float first.
template <typename T>
CUSTOM_OP_CPU_CLONES void backward_piece(const T* __restrict x,
                                         T* __restrict gx, int64_t j0,
                                         int64_t len, int64_t y, acc_t<T> g,
                                         acc_t<T> l) {
  using A = acc_t<T>;
  alignas(64) A buf[std::is_same_v<T, A> ? 1 : cpu::kSoftmaxPiece];
  for (int64_t p = 0; p < len; p += cpu::kSoftmaxPiece) {
    const int64_t n = std::min(cpu::kSoftmaxPiece, len - p);
    const A* v = cpu::as_acc(x + p, buf, n);
    T* out = gx + p;
    for (int64_t k = 0; k < n; ++k) {
      cpu::store_acc(out + k, g * cpu::vec_exp(v[k] - l));
    }
  }
  if (y >= j0 && y < j0 + len) {  // rounded to T once, after the onehot
    const A p = cpu::vec_exp(static_cast<A>(x[y - j0]) - l);
    cpu::store_acc(gx + y - j0, math::grad_logit(g, p, true));
  }
}

template <typename T>
void backward_kernel(const acc_t<T>* g, int64_t g_step, const T* x,
                     const int64_t* labels, const acc_t<T>* lse, T* gx,
                     RowView v, int64_t ignore_index) {
  const int64_t n = v.rows * v.cols;
  torch::stable::parallel_for(0, n, cpu::kGrainSize, [&](int64_t b, int64_t e) {
    cpu::for_each_row_piece(
        b, e, v.cols, [&](int64_t i, int64_t j, int64_t len) {
          const int64_t r = i / v.cols;
          const int64_t y = labels[r];
          if (math::classify(y, v.cols, ignore_index) != Label::kClass) {
            std::fill(gx + i, gx + i + len, static_cast<T>(0.0f));  // ignored
            return;
          }
          backward_piece(x + i, gx + i, j, len, y, g[r * g_step], lse[r]);
        });
  });
}

Tensor cross_entropy_backward_cpu(const Tensor& grad_in,
                                  const Tensor& logits_in,
                                  const Tensor& labels_in, const Tensor& lse_in,
                                  int64_t ignore_index) {
  cross_entropy_checks::check_backward(grad_in, logits_in, labels_in, lse_in);
  const GradView g = grad_view(grad_in);
  const Tensor x = dense(logits_in);
  const Tensor labels = dense(labels_in);
  const Tensor lse = dense(lse_in);
  const RowView v = rows_of(x);
  cross_entropy_checks::check_labels_in_range(cdata<int64_t>(labels), v.rows,
                                              v.cols, ignore_index);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  if (v.rows == 0) return gx;
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    using A = acc_t<scalar_t>;
    backward_kernel(cdata<A>(g.data), g.step, cdata<scalar_t>(x),
                    cdata<int64_t>(labels), cdata<A>(lse), mdata<scalar_t>(gx),
                    v, ignore_index);
  });
  return gx;
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("cross_entropy_backward", TORCH_BOX(&cross_entropy_backward_cpu));
}

}  // namespace custom_op
