// CUDA kernels of rms_norm's forward: y and the per-row rstd, a row per block
// (rms_norm_rows.cuh). Rows of up to 4-8 vectors a thread stay in registers;
// longer rows are read again in the second pass, from L2, where an eviction
// hint on the first pass keeps them. 64-bit indices throughout.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <tuple>
#include <type_traits>

#include "common/checks.h"
#include "common/cuda_utils.cuh"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/reduce.cuh"
#include "common/tensor_utils.h"
#include "common/vec.cuh"
#include "rms_norm_checks.h"
#include "rms_norm_math.h"
#include "rms_norm_rows.cuh"

namespace custom_op::cuda {
namespace {

namespace math = rms_norm_math;
using namespace rms_norm_rows;
using rms_norm_checks::kOp;

// Vectors per thread the plan aims at, and the most kept in registers: a
// 4-byte type's rows past 4 vectors are read twice, as registers run out.
constexpr int kForwardItems = 4;
template <typename T>
constexpr int kMaxForwardItems = sizeof(T) == 4 ? 4 : 8;
// The grid-stride grid caps at this many waves of resident blocks.
constexpr int64_t kMaxWaves = 32;

// Rows of 4 or 8 vectors per thread take at most 64 registers, so that two
// blocks of 512 threads share a multiprocessor: one block alone cannot keep
// the memory busy. bfloat16 spills there at 8 vectors, so it keeps its
// registers.
template <typename T, int kItems>
constexpr int kForwardMinBlocks =
    kItems == 4 ||
            (kItems == 8 && !std::is_same_v<T, torch::headeronly::BFloat16>)
        ? min_blocks_per_sm(1024, kMaxThreads)
        : 1;

template <typename T, int kVecN>
__device__ __forceinline__ acc_t<T> sum_of_squares(const Vec<T, kVecN>& v) {
  using A = acc_t<T>;
  A s = 0;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    const A f = static_cast<A>(v.v[k]);
    s += f * f;
  }
  return s;
}

template <typename T, int kVecN>
__device__ __forceinline__ Vec<T, kVecN> forward_vec(const Vec<T, kVecN>& x,
                                                     const Vec<T, kVecN>& w,
                                                     acc_t<T> rstd) {
  using A = acc_t<T>;
  Vec<T, kVecN> y;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    y.v[k] = static_cast<T>(
        math::forward(static_cast<A>(x.v[k]), rstd, static_cast<A>(w.v[k])));
  }
  return y;
}

// y and rstd, a row per block (rows blockIdx.x, + gridDim.x, ...), the row
// kept in registers: up to kItems vectors a thread.
template <typename T, int kVecN, int kItems>
__global__ void __launch_bounds__(kMaxThreads, kForwardMinBlocks<T, kItems>)
    forward_kernel(const T* __restrict__ x, const T* __restrict__ w,
                   T* __restrict__ y, acc_t<T>* __restrict__ rstd, int64_t rows,
                   int64_t cols, acc_t<T> inv_cols, acc_t<T> eps) {
  using A = acc_t<T>;
  using V = Vec<T, kVecN>;
  const int64_t first = int64_t(threadIdx.x) * kVecN;
  const int64_t stride = int64_t(blockDim.x) * kVecN;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    A ss = 0;
    const int items = thread_items<kItems>(cols / kVecN);
    // x is read once, yet loaded evict_last, as a two-pass kernel's first
    // pass loads it: the forward keeps up with such a kernel only with the
    // hint, and leaves L2 as it does.
    V xv[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) {
        xv[i] = load_vec_evict<Evict::kLast, T, kVecN>(xr + first + i * stride);
      }
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) ss += sum_of_squares(xv[i]);
    }
    const A rs = math::rstd(block_sum(ss), inv_cols, eps);
    if (threadIdx.x == 0) rstd[r] = rs;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) {
        const int64_t at = first + i * stride;
        store_vec(yr + at, forward_vec(xv[i], load_vec<T, kVecN>(w + at), rs));
      }
    }
  }
}

// The same for rows too long for registers: each row read twice.
template <typename T, int kVecN>
__global__ void __launch_bounds__(kMaxThreads, kForwardMinBlocks<T, kReadTwice>)
    forward_read_twice_kernel(const T* __restrict__ x, const T* __restrict__ w,
                              T* __restrict__ y, acc_t<T>* __restrict__ rstd,
                              int64_t rows, int64_t cols, acc_t<T> inv_cols,
                              acc_t<T> eps) {
  using A = acc_t<T>;
  using V = Vec<T, kVecN>;
  const int64_t first = int64_t(threadIdx.x) * kVecN;
  const int64_t stride = int64_t(blockDim.x) * kVecN;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    A ss = 0;
    // Four independent loads in flight per thread; the first pass keeps
    // the row in L2 for the second, which evicts it (Inductor's order).
    A s4[4] = {0, 0, 0, 0};
    int64_t at = first;
    for (; at + 3 * stride < cols; at += 4 * stride) {
      V xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        xv[i] = load_vec_evict<Evict::kLast, T, kVecN>(xr + at + i * stride);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) s4[i] += sum_of_squares(xv[i]);
    }
    for (; at < cols; at += stride) {
      s4[0] += sum_of_squares(load_vec_evict<Evict::kLast, T, kVecN>(xr + at));
    }
    ss = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    const A rs = math::rstd(block_sum(ss), inv_cols, eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    auto write_at = [&](int64_t at) {
      store_vec(
          yr + at,
          forward_vec(load_vec_evict<Evict::kFirst, T, kVecN>(xr + at),
                      load_vec_evict<Evict::kLast, T, kVecN>(w + at), rs));
    };
    for (at = first; at + 3 * stride < cols; at += 4 * stride) {
      V xv[4], wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        xv[i] = load_vec_evict<Evict::kFirst, T, kVecN>(xr + at + i * stride);
        wv[i] = load_vec_evict<Evict::kLast, T, kVecN>(w + at + i * stride);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        store_vec(yr + at + i * stride, forward_vec(xv[i], wv[i], rs));
      }
    }
    for (; at < cols; at += stride) write_at(at);
  }
}

// What the forward kernels read and write.
template <typename T>
struct ForwardArgs {
  const T* x;
  const T* w;
  T* y;
  acc_t<T>* rstd;
  RowView v;
  acc_t<T> inv_cols;
  acc_t<T> eps;
};

template <typename T, int kVecN, int kItems>
void launch_forward_kernel(const ForwardArgs<T>& a, int threads,
                           const LaunchAt& at) {
  const int64_t resident = int64_t(at.info.sm_count) *
                           std::max(1, at.info.max_threads_per_sm / threads);
  const auto grid =
      static_cast<unsigned>(std::min(a.v.rows, resident * kMaxWaves));
  if constexpr (kItems == kReadTwice) {
    forward_read_twice_kernel<T, kVecN><<<grid, threads, 0, at.stream>>>(
        a.x, a.w, a.y, a.rstd, a.v.rows, a.v.cols, a.inv_cols, a.eps);
  } else {
    forward_kernel<T, kVecN, kItems><<<grid, threads, 0, at.stream>>>(
        a.x, a.w, a.y, a.rstd, a.v.rows, a.v.cols, a.inv_cols, a.eps);
  }
  CUSTOM_OP_CHECK_LAUNCH("rms_norm_forward_kernel");
}

template <typename T, int kVecN>
void launch_forward(const ForwardArgs<T>& a, const LaunchAt& at) {
  const RowPlan plan =
      plan_row(a.v.cols / kVecN, kForwardItems, kMaxForwardItems<T>);
  dispatch_items<kMaxForwardItems<T>>(plan.items, [&](auto items) {
    launch_forward_kernel<T, kVecN, decltype(items)::value>(a, plan.threads,
                                                            at);
  });
}

template <typename T>
void forward_typed(const Tensor& x, const Tensor& w, Tensor& y, Tensor& rstd,
                   RowView v, double eps, const LaunchAt& at) {
  using A = acc_t<T>;
  const ForwardArgs<T> a{cdata<T>(x),    cdata<T>(w), mdata<T>(y),
                         mdata<A>(rstd), v,           A(1) / A(v.cols),
                         A(eps)};
  if (use_vectors<T>(v, {a.x, a.w, a.y})) {
    launch_forward<T, kVec16<T>>(a, at);
  } else {
    launch_forward<T, 1>(a, at);
  }
}

std::tuple<Tensor, Tensor> rms_norm_forward_cuda(const Tensor& x_in,
                                                 const Tensor& weight_in,
                                                 double eps) {
  rms_norm_checks::check_forward(x_in, weight_in, eps);
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const Tensor x = dense(x_in);
  const Tensor w = dense(weight_in);
  Tensor y = empty_like_with_shape(x, shape_of(x));
  Tensor rstd = empty_acc_with_shape(x, shape_without_last_dim(x));
  const RowView v = rows_of(x);
  if (v.rows == 0) return {y, rstd};
  if (v.cols == 0) {  // the mean of nothing is 0: rstd = 1 / sqrt(eps)
    CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
      using A = acc_t<scalar_t>;
      torch::stable::fill_(rstd, double(math::rstd(A(0), A(0), A(eps))));
    });
    return {y, rstd};
  }
  const int device = x.get_device_index();
  // PyTorch's current stream: side streams, CUDA graphs.
  const LaunchAt at{device_info(device), device, current_stream(device)};
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    forward_typed<scalar_t>(x, w, y, rstd, v, eps, at);
  });
  return {y, rstd};
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("rms_norm_forward", TORCH_BOX(&rms_norm_forward_cuda));
}

}  // namespace custom_op::cuda
