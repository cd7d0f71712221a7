// CUDA kernel of custom_op::weighted_square_backward: grad_x = 2 * w * x *
// grad and grad_w = x^2 * grad, in one pass.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <tuple>

#include "common/cuda_utils.cuh"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/tensor_utils.h"
#include "common/vec.cuh"
#include "weighted_square_checks.h"
#include "weighted_square_math.h"

namespace custom_op::cuda {
namespace {

using weighted_square_checks::kOp;
namespace math = weighted_square_math;

// As the forward: one vector per thread, then the tail. g_step is the grad's
// GradView step (0: one value for every element).
template <typename T, int kVecN>
__global__ void __launch_bounds__(kThreads)
    weighted_square_backward_kernel(const T* __restrict__ g,
                                    const T* __restrict__ x,
                                    const T* __restrict__ w, T* __restrict__ gx,
                                    T* __restrict__ gw, int64_t n,
                                    int64_t g_step) {
  using A = acc_t<T>;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = n / kVecN;
#pragma unroll 1
  for (int64_t v = first; v < nvec; v += stride) {
    const int64_t i = v * kVecN;
    const auto gv = load_grad<T, kVecN>(g, i, g_step);
    const auto xv = load_vec<T, kVecN>(x + i);
    const auto wv = load_vec<T, kVecN>(w + i);
    Vec<T, kVecN> gxv, gwv;
#pragma unroll
    for (int k = 0; k < kVecN; ++k) {
      const A xf = static_cast<A>(xv.v[k]);
      const A gf = static_cast<A>(gv.v[k]);
      gxv.v[k] = static_cast<T>(math::grad_x(gf, xf, static_cast<A>(wv.v[k])));
      gwv.v[k] = static_cast<T>(math::grad_w(gf, xf));
    }
    store_vec(gx + i, gxv);
    store_vec(gw + i, gwv);
  }
  const int64_t i = nvec * kVecN + first;
  if (i < n) {
    const A xf = static_cast<A>(x[i]);
    const A gf = static_cast<A>(g[i * g_step]);
    gx[i] = static_cast<T>(math::grad_x(gf, xf, static_cast<A>(w[i])));
    gw[i] = static_cast<T>(math::grad_w(gf, xf));
  }
}

template <typename T, int kVecN>
void launch_vec(const T* g, const T* x, const T* w, T* gx, T* gw, int64_t n,
                int64_t g_step, cudaStream_t stream) {
  const unsigned grid = grid_for_each(ceil_div(n / kVecN, kThreads));
  weighted_square_backward_kernel<T, kVecN>
      <<<grid, kThreads, 0, stream>>>(g, x, w, gx, gw, n, g_step);
  CUSTOM_OP_CHECK_LAUNCH("weighted_square_backward_kernel");
}

// 16-byte vectors where every pointer allows them, else one element a thread.
template <typename T>
void launch(const GradView& grad, const Tensor& x, const Tensor& w, Tensor& gx,
            Tensor& gw, cudaStream_t stream) {
  const T* g = cdata<T>(grad.data);
  const T* xp = cdata<T>(x);
  const T* wp = cdata<T>(w);
  T* gxp = mdata<T>(gx);
  T* gwp = mdata<T>(gw);
  const int64_t n = x.numel();
  const bool aligned = (grad.step == 0 || is_aligned16(g)) &&
                       is_aligned16(xp) && is_aligned16(wp) &&
                       is_aligned16(gxp) && is_aligned16(gwp);
  if (aligned) {
    launch_vec<T, kVec16<T>>(g, xp, wp, gxp, gwp, n, grad.step, stream);
  } else {
    launch_vec<T, 1>(g, xp, wp, gxp, gwp, n, grad.step, stream);
  }
}

std::tuple<Tensor, Tensor> weighted_square_backward_cuda(const Tensor& grad_in,
                                                         const Tensor& x_in,
                                                         const Tensor& w_in) {
  weighted_square_checks::check_backward(grad_in, x_in, w_in);
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const GradView grad = grad_view(grad_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  const int64_t n = x.numel();
  if (n == 0) return {gx, gw};
  cudaStream_t stream = current_stream(x.get_device_index());
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    launch<scalar_t>(grad, x, w, gx, gw, stream);
  });
  return {gx, gw};
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("weighted_square_backward", TORCH_BOX(&weighted_square_backward_cuda));
}

}  // namespace custom_op::cuda
