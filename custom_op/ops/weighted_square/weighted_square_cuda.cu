// CUDA kernel of custom_op::weighted_square: y = w * x^2.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

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

// One kVecN-wide vector per thread (grid_for_each), then the last n % kVecN
// elements one per thread. 64-bit indices: correct past 2^31 elements.
template <typename T, int kVecN>
__global__ void __launch_bounds__(kThreads)
    weighted_square_kernel(const T* __restrict__ x, const T* __restrict__ w,
                           T* __restrict__ y, int64_t n) {
  using A = acc_t<T>;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = n / kVecN;
  // Unrolled, this loop would start with a 64-bit trip-count division before
  // the first load.
#pragma unroll 1
  for (int64_t v = first; v < nvec; v += stride) {
    const int64_t i = v * kVecN;
    const auto xv = load_vec<T, kVecN>(x + i);
    const auto wv = load_vec<T, kVecN>(w + i);
    Vec<T, kVecN> yv;
#pragma unroll
    for (int k = 0; k < kVecN; ++k) {
      yv.v[k] = static_cast<T>(weighted_square_math::forward(
          static_cast<A>(xv.v[k]), static_cast<A>(wv.v[k])));
    }
    store_vec(y + i, yv);
  }
  const int64_t i = nvec * kVecN + first;
  if (i < n) {
    y[i] = static_cast<T>(weighted_square_math::forward(static_cast<A>(x[i]),
                                                        static_cast<A>(w[i])));
  }
}

template <typename T, int kVecN>
void launch_vec(const T* x, const T* w, T* y, int64_t n, cudaStream_t stream) {
  const unsigned grid = grid_for_each(ceil_div(n / kVecN, kThreads));
  weighted_square_kernel<T, kVecN><<<grid, kThreads, 0, stream>>>(x, w, y, n);
  CUSTOM_OP_CHECK_LAUNCH("weighted_square_kernel");
}

// 16-byte vectors where every pointer allows them, else one element a thread.
template <typename T>
void launch(const T* x, const T* w, T* y, int64_t n, cudaStream_t stream) {
  if (is_aligned16(x) && is_aligned16(w) && is_aligned16(y)) {
    launch_vec<T, kVec16<T>>(x, w, y, n, stream);
  } else {
    launch_vec<T, 1>(x, w, y, n, stream);
  }
}

Tensor weighted_square_cuda(const Tensor& x_in, const Tensor& w_in) {
  weighted_square_checks::check_forward(x_in, w_in);
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor y = empty_like_with_shape(x, shape_of(x));
  const int64_t n = x.numel();
  if (n == 0) return y;
  cudaStream_t stream = current_stream(x.get_device_index());
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    launch(cdata<scalar_t>(x), cdata<scalar_t>(w), mdata<scalar_t>(y), n,
           stream);
  });
  return y;
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("weighted_square", TORCH_BOX(&weighted_square_cuda));
}

}  // namespace custom_op::cuda
