// CPU kernels of custom_op::weighted_square: y = w * x^2.
#include <torch/csrc/stable/ops.h>

#include "common/cpu_loops.h"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/tensor_utils.h"
#include "common/write_into.h"
#include "weighted_square_backward_cpu.h"
#include "weighted_square_weight_form.h"

namespace custom_op {
namespace {

using weighted_square::check_inputs;
using weighted_square::WeightForm;

constexpr const char* kOp = CUSTOM_OP_QUALIFIED("weighted_square");

// y may be x itself (in place): no __restrict; CUSTOM_OP_IVDEP tells the
// vectorizer that element k is read before it is written.
template <typename T>
CUSTOM_OP_CPU_CLONES void weighted_square_piece(const T* x, const T* w, T* y,
                                                int64_t len) {
  using A = acc_t<T>;
  CUSTOM_OP_IVDEP
  for (int64_t k = 0; k < len; ++k) {
    const A xv = static_cast<A>(x[k]);
    y[k] = static_cast<T>(static_cast<A>(w[k]) * xv * xv);
  }
}

// y = w * x^2 for dense x and w; y is dense and may be x itself.
void weighted_square_into(const Tensor& x, const Tensor& w, Tensor& y,
                          WeightForm form) {
  const int64_t n = x.numel();
  if (n == 0) return;
  // w repeats every `period` elements of x.
  const int64_t period = form == WeightForm::Full ? n : rows_of(x).cols;
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    const scalar_t* xp = cdata<scalar_t>(x);
    const scalar_t* wp = cdata<scalar_t>(w);
    scalar_t* yp = mdata<scalar_t>(y);
    torch::stable::parallel_for(
        0, n, cpu::kGrainSize, [&](int64_t begin, int64_t end) {
          cpu::for_each_row_piece(
              begin, end, period, [&](int64_t i, int64_t j, int64_t len) {
                weighted_square_piece(xp + i, wp + j, yp + i, len);
              });
        });
  });
}

Tensor weighted_square_cpu(const Tensor& x_in, const Tensor& w_in) {
  const WeightForm form = check_inputs(kOp, x_in, w_in);
  const Tensor x = dense(x_in);
  Tensor y = empty_like_with_shape(x, shape_of(x));
  weighted_square_into(x, dense(w_in), y, form);
  return y;
}

void weighted_square_out_cpu(const Tensor& x, const Tensor& w, Tensor out) {
  const WeightForm form = check_inputs(kOp, x, w);
  check_like(kOp, "out", out, x, shape_of(x));
  write_into(
      out,
      [&](const Tensor& xd, const Tensor& wd, Tensor& y) {
        weighted_square_into(xd, wd, y, form);
      },
      x, w);
}

void weighted_square_inplace_cpu(Tensor x, const Tensor& w) {
  weighted_square_out_cpu(x, w, x);
}

std::tuple<Tensor, Tensor> weighted_square_backward_cpu(
    const Tensor& grad, const Tensor& x, const Tensor& w,
    bool /*deterministic*/) {
  // The CPU kernels always sum in a fixed order.
  const WeightForm form = check_inputs(kOp, x, w);
  check_like(kOp, "grad", grad, x, shape_of(x));
  return cpu::weighted_square_grad(grad, x, w, form);
}

}  // namespace

CUSTOM_OP_IMPL(CPU, m) {
  m.impl("weighted_square", TORCH_BOX(&weighted_square_cpu));
  m.impl("weighted_square.out", TORCH_BOX(&weighted_square_out_cpu));
  m.impl("weighted_square_", TORCH_BOX(&weighted_square_inplace_cpu));
  m.impl("weighted_square_backward", TORCH_BOX(&weighted_square_backward_cpu));
}

}  // namespace custom_op
