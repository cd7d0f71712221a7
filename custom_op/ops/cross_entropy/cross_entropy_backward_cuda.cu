// CUDA kernels of cross_entropy's backward (grad_logits), a block per row
// (cross_entropy_rows.cuh): each thread writes grad * (exp(x - lse) - onehot)
// for its elements; rows whose label is ignore_index are written with zeros
// and not read. Accumulation in float32 (float64 for float64); 64-bit indices
// throughout. A label outside [0, V) that is not ignore_index gives that
// row NaN gradients.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "common/checks.h"
#include "common/cuda_utils.cuh"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/softmax.cuh"
#include "common/softmax.h"
#include "common/tensor_utils.h"
#include "common/vec.cuh"
#include "cross_entropy_checks.h"
#include "cross_entropy_math.h"
#include "cross_entropy_rows.cuh"

namespace custom_op::cuda {
namespace {

namespace math = cross_entropy_math;
using namespace cross_entropy_rows;
using cross_entropy_checks::kOp;
using math::Label;

// grad_x of kVecN elements at columns j0, j0 + 1, ...
template <typename T, int kVecN>
__device__ __forceinline__ Vec<T, kVecN> grad_vec(const Vec<T, kVecN>& x,
                                                  int64_t j0, int64_t y,
                                                  acc_t<T> scale, acc_t<T> l) {
  using A = acc_t<T>;
  Vec<T, kVecN> out;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    const A p = softmax_exp(static_cast<A>(x.v[k]) - l);
    out.v[k] = static_cast<T>(math::grad_logit(scale, p, j0 + k == y));
  }
  return out;
}

template <typename T, int kVecN>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(const acc_t<T>* __restrict__ g, int64_t g_step,
                    const T* __restrict__ x, const int64_t* __restrict__ labels,
                    const acc_t<T>* __restrict__ lse, T* __restrict__ gx,
                    int64_t rows, int64_t cols, int64_t ignore_index) {
  using A = acc_t<T>;
  using V = Vec<T, kVecN>;
  const int64_t step = blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* gr = gx + r * cols;
    const int64_t y = labels[r];
    const Label kind = math::classify(y, cols, ignore_index);
    // gx's rows are aligned as x's (the host checks): one split for both.
    const RowSplit split = split_row<T, kVecN>(xr, cols);
    const int64_t j = single_column(split, cols, kVecN);
    if (kind == Label::kIgnored) {
      V zeros;
#pragma unroll
      for (int k = 0; k < kVecN; ++k) zeros.v[k] = static_cast<T>(0.0f);
      for (int64_t v = threadIdx.x; v < split.vecs; v += step) {
        store_vec(gr + split.head + v * kVecN, zeros);
      }
      if (j >= 0) gr[j] = static_cast<T>(0.0f);
      continue;
    }
    const A scale = kind == Label::kClass ? g[r * g_step] : A(NAN);
    const A l = lse[r];
    int64_t v = threadIdx.x;
    for (; v + (kUnroll - 1) * step < split.vecs; v += kUnroll * step) {
      V in[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        in[u] = load_vec<T, kVecN>(xr + split.head + (v + u * step) * kVecN);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t j0 = split.head + (v + u * step) * kVecN;
        store_vec(gr + j0, grad_vec<T, kVecN>(in[u], j0, y, scale, l));
      }
    }
    for (; v < split.vecs; v += step) {
      const int64_t j0 = split.head + v * kVecN;
      const V in = load_vec<T, kVecN>(xr + j0);
      store_vec(gr + j0, grad_vec<T, kVecN>(in, j0, y, scale, l));
    }
    if (j >= 0) {
      const A p = softmax_exp(static_cast<A>(xr[j]) - l);
      gr[j] = static_cast<T>(math::grad_logit(scale, p, j == y));
    }
  }
}

template <typename T, int kVecN>
void launch_backward_n(const acc_t<T>* g, int64_t g_step, const T* x,
                       const int64_t* labels, const acc_t<T>* lse, T* gx,
                       RowView v, int64_t ignore_index, const DeviceInfo& info,
                       cudaStream_t stream) {
  const int threads = threads_for(v.cols, kVecN);
  backward_kernel<T, kVecN>
      <<<grid_for_rows(v.rows, threads, info), threads, 0, stream>>>(
          g, g_step, x, labels, lse, gx, v.rows, v.cols, ignore_index);
  CUSTOM_OP_CHECK_LAUNCH("cross_entropy_backward_kernel");
}

// 16-byte vectors when grad_x's rows start at x's offset from a 16-byte
// boundary (always, unless x is a view at an odd offset).
template <typename T>
void launch_backward(const acc_t<T>* g, int64_t g_step, const T* x,
                     const int64_t* labels, const acc_t<T>* lse, T* gx,
                     RowView v, int64_t ignore_index, const DeviceInfo& info,
                     cudaStream_t stream) {
  const auto offset = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16;
  };
  if (offset(x) == offset(gx)) {
    launch_backward_n<T, kVec16<T>>(g, g_step, x, labels, lse, gx, v,
                                    ignore_index, info, stream);
  } else {
    launch_backward_n<T, 1>(g, g_step, x, labels, lse, gx, v, ignore_index,
                            info, stream);
  }
}

Tensor cross_entropy_backward_cuda(const Tensor& grad_in,
                                   const Tensor& logits_in,
                                   const Tensor& labels_in,
                                   const Tensor& lse_in, int64_t ignore_index) {
  cross_entropy_checks::check_backward(grad_in, logits_in, labels_in, lse_in);
  torch::stable::accelerator::DeviceGuard guard(logits_in.get_device_index());
  const GradView g = grad_view(grad_in);
  const Tensor x = dense(logits_in);
  const Tensor labels = dense(labels_in);
  const Tensor lse = dense(lse_in);
  const RowView v = rows_of(x);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  if (v.rows == 0) return gx;
  const int device = x.get_device_index();
  const DeviceInfo& info = device_info(device);
  cudaStream_t stream = current_stream(device);
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    using A = acc_t<scalar_t>;
    launch_backward(cdata<A>(g.data), g.step, cdata<scalar_t>(x),
                    cdata<int64_t>(labels), cdata<A>(lse), mdata<scalar_t>(gx),
                    v, ignore_index, info, stream);
  });
  return gx;
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("cross_entropy_backward", TORCH_BOX(&cross_entropy_backward_cuda));
}

}  // namespace custom_op::cuda
