// CUDA kernels of custom_op::weighted_square: y = w * x^2.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include "common/cuda_utils.cuh"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/tensor_utils.h"
#include "common/vec.cuh"
#include "common/write_into.h"
#include "weighted_square_backward_cuda.h"
#include "weighted_square_weight_form.h"

namespace custom_op::cuda {
namespace {

using weighted_square::check_inputs;
using weighted_square::WeightForm;

constexpr const char* kOp = CUSTOM_OP_QUALIFIED("weighted_square");

// One kVecN-wide vector per thread and step of a grid-stride loop. w is like x
// or, kPerFeature, 1-D and repeating every `period` elements (period %
// kVecN == 0 on the vector path): its column then advances by a fixed step
// per iteration, with no 64-bit division per vector (a modulo in the loop put
// a branch and a division call between each vector's loads). 64-bit
// indices: correct past 2^31 elements. Each thread reads its elements before
// writing them, so y may be x or w itself (in place).
template <typename T, int kVecN, bool kPerFeature>
__device__ __forceinline__ void weighted_square_body(const T* x, const T* w,
                                                     T* y, int64_t n,
                                                     int64_t period) {
  using A = acc_t<T>;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = n / kVecN;
  int64_t col = 0, col_step = 0;
  if constexpr (kPerFeature) {
    col = first * kVecN % period;
    col_step = stride * kVecN % period;
  }
  auto vector_at = [&](int64_t v, int64_t w_at) {
    const int64_t i = v * kVecN;
    const auto xv = load_vec<T, kVecN>(x + i);
    const auto wv = load_vec<T, kVecN>(w + w_at);
    Vec<T, kVecN> yv;
#pragma unroll
    for (int k = 0; k < kVecN; ++k) {
      const A xf = static_cast<A>(xv.v[k]);
      yv.v[k] = static_cast<T>(static_cast<A>(wv.v[k]) * xf * xf);
    }
    store_vec(y + i, yv);
  };
  if constexpr (kPerFeature) {
    for (int64_t v = first; v < nvec; v += stride) {
      vector_at(v, col);
      col += col_step;
      if (col >= period) col -= period;
    }
  } else {
    // One vector per thread (grid_for_each): unrolled, this loop would start
    // with a 64-bit trip-count division before the first load.
#pragma unroll 1
    for (int64_t v = first; v < nvec; v += stride) vector_at(v, v * kVecN);
  }
  // The last n % kVecN elements, one per thread.
  const int64_t i = nvec * kVecN + first;
  if (i < n) {
    const A xf = static_cast<A>(x[i]);
    y[i] = static_cast<T>(static_cast<A>(w[kPerFeature ? i % period : i]) * xf *
                          xf);
  }
}

// A new output: nothing aliases, which __restrict__ tells the compiler.
template <typename T, int kVecN, bool kPerFeature>
__global__ void __launch_bounds__(kThreads)
    weighted_square_kernel(const T* __restrict__ x, const T* __restrict__ w,
                           T* __restrict__ y, int64_t n, int64_t period) {
  weighted_square_body<T, kVecN, kPerFeature>(x, w, y, n, period);
}

// In place, or out= aliasing an input: no __restrict__.
template <typename T, int kVecN, bool kPerFeature>
__global__ void __launch_bounds__(kThreads)
    weighted_square_aliased_kernel(const T* x, const T* w, T* y, int64_t n,
                                   int64_t period) {
  weighted_square_body<T, kVecN, kPerFeature>(x, w, y, n, period);
}

template <typename T, int kVecN, bool kPerFeature>
void launch_form(const T* x, const T* w, T* y, int64_t n, int64_t period,
                 const DeviceInfo& info, cudaStream_t stream) {
  // w like x: one vector per thread (no grid-stride loop). A 1-D w keeps the
  // 32-wave grid, whose threads find their column with one modulo each, not one
  // per vector.
  const int64_t work_blocks = ceil_div(n / kVecN, kThreads);
  const unsigned grid =
      kPerFeature ? grid_for(work_blocks, info) : grid_for_each(work_blocks);
  if (y == x || y == w) {
    weighted_square_aliased_kernel<T, kVecN, kPerFeature>
        <<<grid, kThreads, 0, stream>>>(x, w, y, n, period);
  } else {
    weighted_square_kernel<T, kVecN, kPerFeature>
        <<<grid, kThreads, 0, stream>>>(x, w, y, n, period);
  }
  CUSTOM_OP_CHECK_LAUNCH("weighted_square_kernel");
}

template <typename T, int kVecN>
void launch_shape(const T* x, const T* w, T* y, int64_t n, int64_t period,
                  const DeviceInfo& info, cudaStream_t stream) {
  if (period == n) {
    launch_form<T, kVecN, false>(x, w, y, n, period, info, stream);
  } else {
    launch_form<T, kVecN, true>(x, w, y, n, period, info, stream);
  }
}

template <typename T>
void launch_weighted_square(const T* x, const T* w, T* y, int64_t n,
                            int64_t period, const DeviceInfo& info,
                            cudaStream_t stream) {
  constexpr int kVecN = kVec16<T>;
  const bool vectorized = period % kVecN == 0 && is_aligned16(x) &&
                          is_aligned16(w) && is_aligned16(y);
  if (vectorized) {
    launch_shape<T, kVecN>(x, w, y, n, period, info, stream);
  } else {
    launch_shape<T, 1>(x, w, y, n, period, info, stream);
  }
}

// y = w * x^2 for dense x and w; y is dense and may be x itself.
void weighted_square_into(const Tensor& x, const Tensor& w, Tensor& y,
                          WeightForm form) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const int64_t period = form == WeightForm::Full ? n : rows_of(x).cols;
  const int device = x.get_device_index();
  const DeviceInfo& info = device_info(device);
  cudaStream_t stream = current_stream(device);
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    launch_weighted_square(cdata<scalar_t>(x), cdata<scalar_t>(w),
                           mdata<scalar_t>(y), n, period, info, stream);
  });
}

Tensor weighted_square_cuda(const Tensor& x_in, const Tensor& w_in) {
  const WeightForm form = check_inputs(kOp, x_in, w_in);
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const Tensor x = dense(x_in);
  Tensor y = empty_like_with_shape(x, shape_of(x));
  weighted_square_into(x, dense(w_in), y, form);
  return y;
}

void weighted_square_out_cuda(const Tensor& x, const Tensor& w, Tensor out) {
  const WeightForm form = check_inputs(kOp, x, w);
  check_like(kOp, "out", out, x, shape_of(x));
  torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  write_into(
      out,
      [&](const Tensor& xd, const Tensor& wd, Tensor& y) {
        weighted_square_into(xd, wd, y, form);
      },
      x, w);
}

void weighted_square_inplace_cuda(Tensor x, const Tensor& w) {
  weighted_square_out_cuda(x, w, x);
}

std::tuple<Tensor, Tensor> weighted_square_backward_cuda(const Tensor& grad,
                                                         const Tensor& x,
                                                         const Tensor& w,
                                                         bool deterministic) {
  const WeightForm form = check_inputs(kOp, x, w);
  check_like(kOp, "grad", grad, x, shape_of(x));
  return weighted_square_grad(grad, x, w, form, deterministic);
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("weighted_square", TORCH_BOX(&weighted_square_cuda));
  m.impl("weighted_square.out", TORCH_BOX(&weighted_square_out_cuda));
  m.impl("weighted_square_", TORCH_BOX(&weighted_square_inplace_cuda));
  m.impl("weighted_square_backward", TORCH_BOX(&weighted_square_backward_cuda));
}

}  // namespace custom_op::cuda
