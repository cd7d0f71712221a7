// CUDA kernels of rms_norm's fused backward: grad_x and grad_weight, a row per
// block (rms_norm_rows.cuh). Rows of up to 2-4 vectors a thread stay in
// registers, longer ones are read twice; rows of 16-byte vectors of a 2-byte
// type are copied ahead into shared memory instead (cp.async), where they
// fit. grad_weight is summed per block (a long row's sums in shared memory,
// as many columns as it holds), then over blocks in a fixed order
// (common/column_sum.cuh): no atomics, the same bits on every run. 64-bit
// indices throughout.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <tuple>
#include <type_traits>

#include "common/async_copy.cuh"
#include "common/checks.h"
#include "common/column_sum.cuh"
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

// Vectors per thread the plan aims at, and the most kept in registers: the
// backward keeps x, grad, w, its grad_weight sums and the next row's loads
// there, and more than 2 vectors of a 2-byte type spill.
constexpr int kBackwardItems = 1;
template <typename T>
constexpr int kMaxBackwardItems = sizeof(T) == 2 ? 2 : 4;
// The staged backward holds no next row in registers: up to 4 vectors of any
// type. Its shared memory stages: 4-byte and wider types gain from 3 rows in
// flight where they fit; 2-byte types hold as many bytes in flight with 1.
constexpr int kMaxStagedItems = 4;
template <typename T>
constexpr int kMostStages = sizeof(T) >= 4 ? 4 : 2;

template <typename T, int kVecN>
__device__ __forceinline__ acc_t<T> sum_gwx(const Vec<T, kVecN>& g,
                                            const Vec<T, kVecN>& w,
                                            const Vec<T, kVecN>& x) {
  using A = acc_t<T>;
  A s = 0;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    s += static_cast<A>(g.v[k]) * static_cast<A>(w.v[k]) *
         static_cast<A>(x.v[k]);
  }
  return s;
}

// grad_x of one vector; its grad_weight terms are added to gw[0..kVecN).
template <typename T, int kVecN>
__device__ __forceinline__ Vec<T, kVecN> backward_vec(
    const Vec<T, kVecN>& g, const Vec<T, kVecN>& x, const Vec<T, kVecN>& w,
    acc_t<T> rstd, acc_t<T> coef, acc_t<T>* gw) {
  using A = acc_t<T>;
  Vec<T, kVecN> gx;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    const A gv = static_cast<A>(g.v[k]);
    const A xv = static_cast<A>(x.v[k]);
    gx.v[k] = static_cast<T>(
        math::grad_x(gv, xv, static_cast<A>(w.v[k]), rstd, coef));
    gw[k] += math::grad_weight_term(gv, xv, rstd);
  }
  return gx;
}

// sums[0..kVecN) += terms[0..kVecN), in 16-byte pieces: scalar accesses of a
// thread's 8 consecutive floats in shared memory would conflict 8 ways.
template <typename A, int kVecN>
__device__ __forceinline__ void add_terms(A* sums, const A (&terms)[kVecN]) {
  constexpr int kPiece = kVecN * sizeof(A) > 16 ? 16 / sizeof(A) : kVecN;
  using P = Vec<A, kPiece>;
#pragma unroll
  for (int p = 0; p < kVecN; p += kPiece) {
    P s = *reinterpret_cast<const P*>(sums + p);
#pragma unroll
    for (int k = 0; k < kPiece; ++k) s.v[k] += terms[p + k];
    *reinterpret_cast<P*>(sums + p) = s;
  }
}

// grad_x, and block b's grad_weight sums over its rows (b, b + gridDim.x, ...)
// in partial[b, :], the rows kept in registers: up to kItems vectors a thread.
// gridDim.x <= rows: every block has a row.
template <typename T, int kVecN, int kItems>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(const T* __restrict__ g, const T* __restrict__ x,
                    const T* __restrict__ w, const acc_t<T>* __restrict__ rstd,
                    T* __restrict__ gx, acc_t<T>* __restrict__ partial,
                    int64_t rows, int64_t cols, acc_t<T> inv_cols,
                    int64_t g_step) {
  using A = acc_t<T>;
  using V = Vec<T, kVecN>;
  const int64_t first = int64_t(threadIdx.x) * kVecN;
  const int64_t stride = int64_t(blockDim.x) * kVecN;
  A* part = partial + int64_t(blockIdx.x) * cols;
  const int items = thread_items<kItems>(cols / kVecN);
  A gw[kItems][kVecN] = {};
  // w, and the row's x and grad, stay in registers; the next row's are
  // loaded while this one is summed.
  V wv[kItems], xv[kItems], gv[kItems];
  auto load_row = [&](int64_t r, V* xs, V* gs) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) {
        const int64_t at = r * cols + first + i * stride;
        xs[i] = load_vec<T, kVecN>(x + at);
        gs[i] = load_grad<T, kVecN>(g, at, g_step);
      }
    }
  };
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (i < items) wv[i] = load_vec<T, kVecN>(w + first + i * stride);
  }
  load_row(blockIdx.x, xv, gv);
  // rstd too is loaded a row ahead: read where it is used, after the
  // block's sum, its latency stalled every row.
  A rs_next = rstd[blockIdx.x];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    V xn[kItems] = {}, gn[kItems] = {};
    const A rs = rs_next;
    if (r + gridDim.x < rows) {
      load_row(r + gridDim.x, xn, gn);
      rs_next = rstd[r + gridDim.x];
    }
    A s = 0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) s += sum_gwx(gv[i], wv[i], xv[i]);
    }
    const A coef = math::grad_x_coef(rs, inv_cols, block_sum(s));
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) {
        store_vec(gx + r * cols + first + i * stride,
                  backward_vec(gv[i], xv[i], wv[i], rs, coef, gw[i]));
      }
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      xv[i] = xn[i];
      gv[i] = gn[i];
    }
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (i < items) {
#pragma unroll
      for (int k = 0; k < kVecN; ++k) part[first + i * stride + k] = gw[i][k];
    }
  }
}

// The same for rows too long for registers: each row read twice. Columns
// below shared_cols (a multiple of kVecN) sum in shared memory, the rest in
// the partial row; each column belongs to one thread, which zeroes it first
// and copies it out last: no barrier. In registers the sums would leave room
// for one block of 512 threads a multiprocessor, not two.
template <typename T, int kVecN>
__global__ void __launch_bounds__(kMaxThreads)
    backward_read_twice_kernel(const T* __restrict__ g, const T* __restrict__ x,
                               const T* __restrict__ w,
                               const acc_t<T>* __restrict__ rstd,
                               T* __restrict__ gx,
                               acc_t<T>* __restrict__ partial, int64_t rows,
                               int64_t cols, acc_t<T> inv_cols, int64_t g_step,
                               int64_t shared_cols) {
  using A = acc_t<T>;
  const int64_t first = int64_t(threadIdx.x) * kVecN;
  const int64_t stride = int64_t(blockDim.x) * kVecN;
  A* part = partial + int64_t(blockIdx.x) * cols;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  A* sums = reinterpret_cast<A*>(shared_bytes);
  auto sums_at = [&](int64_t at) {
    return at < shared_cols ? sums + at : part + at;
  };
  for (int64_t at = first; at < cols; at += stride) {
    A* s = sums_at(at);
#pragma unroll
    for (int k = 0; k < kVecN; ++k) s[k] = A(0);
  }
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * cols * g_step;
    const T* xr = x + r * cols;
    const A rs = rstd[r];  // in flight during the first pass
    A s = 0;
    // As in the forward, the first pass keeps the row in L2 for the second,
    // which evicts it: the second pass reads L2, not memory.
#pragma unroll 4
    for (int64_t at = first; at < cols; at += stride) {
      s += sum_gwx(load_grad_evict<Evict::kLast, T, kVecN>(gr, at, g_step),
                   load_vec<T, kVecN>(w + at),
                   load_vec_evict<Evict::kLast, T, kVecN>(xr + at));
    }
    const A coef = math::grad_x_coef(rs, inv_cols, block_sum(s));
#pragma unroll 4
    for (int64_t at = first; at < cols; at += stride) {
      A terms[kVecN] = {};
      store_vec(
          gx + r * cols + at,
          backward_vec(load_grad_evict<Evict::kFirst, T, kVecN>(gr, at, g_step),
                       load_vec_evict<Evict::kFirst, T, kVecN>(xr + at),
                       load_vec<T, kVecN>(w + at), rs, coef, terms));
      add_terms(sums_at(at), terms);
    }
  }
  for (int64_t at = first; at < shared_cols; at += stride) {
#pragma unroll
    for (int k = 0; k < kVecN; ++k) part[at + k] = sums[at + k];
  }
}

// The backward of rows of 16-byte vectors, a dense grad and up to
// kMaxStagedItems vectors a thread, where kStages rows of x and grad fit in
// shared memory: each thread copies its vectors kStages - 1 rows ahead there,
// so that loads stay in flight through each row's sum and writes without the
// next row in registers. A thread reads back only what it copied: no barrier
// but block_sum's.
template <typename T, int kItems, int kStages>
__global__ void __launch_bounds__(kMaxThreads)
    backward_staged_kernel(const T* __restrict__ g, const T* __restrict__ x,
                           const T* __restrict__ w,
                           const acc_t<T>* __restrict__ rstd,
                           T* __restrict__ gx, acc_t<T>* __restrict__ partial,
                           int64_t rows, int64_t cols, acc_t<T> inv_cols) {
  using A = acc_t<T>;
  constexpr int kVecN = kVec16<T>;
  using V = Vec<T, kVecN>;
  // Stage s: a row of x at s * 2 * cols, its grad after it.
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* stages = reinterpret_cast<T*>(shared_bytes);
  const int64_t first = int64_t(threadIdx.x) * kVecN;
  const int64_t stride = int64_t(blockDim.x) * kVecN;
  const int items = thread_items<kItems>(cols / kVecN);
  auto fetch = [&](int64_t r, int stage) {
    if (r < rows) {
      T* xs = stages + int64_t(stage) * 2 * cols;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        if (i < items) {
          const int64_t at = first + i * stride;
          copy16_async(xs + at, x + r * cols + at);
          copy16_async(xs + cols + at, g + r * cols + at);
        }
      }
    }
    copy_async_commit();  // empty past the last row: a group per row still
  };
  for (int s = 0; s + 1 < kStages; ++s) {
    fetch(blockIdx.x + int64_t(s) * gridDim.x, s);
  }
  V wv[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (i < items) wv[i] = load_vec<T, kVecN>(w + first + i * stride);
  }
  A gw[kItems][kVecN] = {};
  int stage = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    // Refills the previous row's stage, whose values this thread has used.
    fetch(r + int64_t(kStages - 1) * gridDim.x,
          stage == 0 ? kStages - 1 : stage - 1);
    const A rs = rstd[r];
    copy_async_wait<kStages - 1>();  // this row's group: the newer may run on
    // x and grad are read from the stage again after the row's sum, not held
    // in registers across it: 4 vectors of a 2-byte type would spill.
    const T* xs = stages + int64_t(stage) * 2 * cols + first;
    const T* gs = xs + cols;
    A s = 0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) {
        s += sum_gwx(load_vec<T, kVecN>(gs + i * stride), wv[i],
                     load_vec<T, kVecN>(xs + i * stride));
      }
    }
    const A coef = math::grad_x_coef(rs, inv_cols, block_sum(s));
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < items) {
        store_vec(gx + r * cols + first + i * stride,
                  backward_vec(load_vec<T, kVecN>(gs + i * stride),
                               load_vec<T, kVecN>(xs + i * stride), wv[i], rs,
                               coef, gw[i]));
      }
    }
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  A* part = partial + int64_t(blockIdx.x) * cols;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (i < items) {
#pragma unroll
      for (int k = 0; k < kVecN; ++k) part[first + i * stride + k] = gw[i][k];
    }
  }
}

// What the backward kernels read and write.
template <typename T>
struct BackwardArgs {
  const T* g;
  int64_t g_step;  // the grad's GradView step (0: one value for all)
  const T* x;
  const T* w;
  const acc_t<T>* rstd;
  T* gx;
  T* gw;
  RowView v;
  acc_t<T> inv_cols;
  const Tensor& like;  // x: the partial sums' device and dtype
};

// A backward kernel over as many blocks as are resident at once, each summing
// its rows' grad_weight terms into its own row of partial sums, then those
// rows summed into gw: a fixed grid, so the same rows meet in the same order
// on every run. launch(blocks, partial) starts the kernel.
template <typename T, auto kKernel, typename Launch>
void launch_with_partial_sums(const BackwardArgs<T>& a, int threads,
                              size_t shared_bytes, const LaunchAt& at,
                              const Launch& launch) {
  const RowView v = a.v;
  const int64_t blocks = std::min(
      v.rows, int64_t(at.info.sm_count) *
                  blocks_per_sm<kKernel>(at.device, threads, shared_bytes));
  Tensor partial = empty_acc_with_shape(a.like, {blocks, v.cols});
  acc_t<T>* pp = mdata<acc_t<T>>(partial);
  launch(unsigned(blocks), pp);
  launch_column_sum<T>(pp, a.gw, blocks, v.cols, at.stream);
}

template <typename T, int kVecN, int kItems>
void launch_backward_kernel(const BackwardArgs<T>& a, int threads,
                            const LaunchAt& at) {
  constexpr auto kKernel = backward_kernel<T, kVecN, kItems>;
  launch_with_partial_sums<T, kKernel>(
      a, threads, 0, at, [&](unsigned blocks, acc_t<T>* pp) {
        kKernel<<<blocks, threads, 0, at.stream>>>(a.g, a.x, a.w, a.rstd, a.gx,
                                                   pp, a.v.rows, a.v.cols,
                                                   a.inv_cols, a.g_step);
        CUSTOM_OP_CHECK_LAUNCH("rms_norm_backward_kernel");
      });
}

template <typename T, int kVecN>
void launch_backward_read_twice_kernel(const BackwardArgs<T>& a, int threads,
                                       const LaunchAt& at) {
  constexpr auto kKernel = backward_read_twice_kernel<T, kVecN>;
  const int64_t fit = max_dynamic_smem<kKernel>(at.device, at.info) /
                      int64_t(sizeof(acc_t<T>) * kVecN) * kVecN;
  const int64_t shared_cols = std::min(a.v.cols, fit);
  const size_t shared_bytes = size_t(shared_cols) * sizeof(acc_t<T>);
  launch_with_partial_sums<T, kKernel>(
      a, threads, shared_bytes, at, [&](unsigned blocks, acc_t<T>* pp) {
        kKernel<<<blocks, threads, shared_bytes, at.stream>>>(
            a.g, a.x, a.w, a.rstd, a.gx, pp, a.v.rows, a.v.cols, a.inv_cols,
            a.g_step, shared_cols);
        CUSTOM_OP_CHECK_LAUNCH("rms_norm_backward_read_twice_kernel");
      });
}

// false, launching nothing, where kStages rows of x and grad do not fit in a
// block's shared memory.
template <typename T, int kItems, int kStages>
bool launch_backward_staged_kernel(const BackwardArgs<T>& a, int threads,
                                   const LaunchAt& at) {
  constexpr auto kKernel = backward_staged_kernel<T, kItems, kStages>;
  const int64_t bytes = int64_t(kStages) * 2 * a.v.cols * int64_t(sizeof(T));
  if (bytes > max_dynamic_smem<kKernel>(at.device, at.info)) return false;
  const auto shared_bytes = size_t(bytes);
  launch_with_partial_sums<T, kKernel>(
      a, threads, shared_bytes, at, [&](unsigned blocks, acc_t<T>* pp) {
        kKernel<<<blocks, threads, shared_bytes, at.stream>>>(
            a.g, a.x, a.w, a.rstd, a.gx, pp, a.v.rows, a.v.cols, a.inv_cols);
        CUSTOM_OP_CHECK_LAUNCH("rms_norm_backward_staged_kernel");
      });
  return true;
}

// The staged backward, the most stages that fit; false where none do or the
// row is longer than kMaxStagedItems vectors a thread.
template <typename T>
bool launch_backward_staged(const BackwardArgs<T>& a, const LaunchAt& at) {
  const RowPlan plan =
      plan_row(a.v.cols / kVec16<T>, kBackwardItems, kMaxStagedItems);
  bool launched = false;
  dispatch_items<kMaxStagedItems>(plan.items, [&](auto items) {
    constexpr int kItems = decltype(items)::value;
    if constexpr (kItems != kReadTwice) {
      launched = launch_backward_staged_kernel<T, kItems, kMostStages<T>>(
          a, plan.threads, at);
      if constexpr (kMostStages<T> > 2) {
        if (!launched) {
          launched =
              launch_backward_staged_kernel<T, kItems, 2>(a, plan.threads, at);
        }
      }
    }
  });
  return launched;
}

template <typename T, int kVecN>
void launch_backward(const BackwardArgs<T>& a, const LaunchAt& at) {
  // 16-bit types only: for float32 the register kernel is as fast or faster.
  if constexpr (kVecN == kVec16<T> && sizeof(T) == 2) {
    // Older GPUs have no asynchronous copy to overlap with the rows' math.
    if (a.g_step == 1 && at.info.major >= 8 &&
        launch_backward_staged<T>(a, at)) {
      return;
    }
  }
  constexpr int kMaxItems = kMaxBackwardItems<T>;
  const RowPlan plan = plan_row(a.v.cols / kVecN, kBackwardItems, kMaxItems);
  dispatch_items<kMaxItems>(plan.items, [&](auto items) {
    constexpr int kItems = decltype(items)::value;
    if constexpr (kItems == kReadTwice) {
      launch_backward_read_twice_kernel<T, kVecN>(a, plan.threads, at);
    } else {
      launch_backward_kernel<T, kVecN, kItems>(a, plan.threads, at);
    }
  });
}

template <typename T>
void backward_typed(const GradView& g, const Tensor& x, const Tensor& w,
                    const Tensor& rstd, Tensor& gx, Tensor& gw, RowView v,
                    const LaunchAt& at) {
  using A = acc_t<T>;
  const BackwardArgs<T> a{cdata<T>(g.data), g.step,
                          cdata<T>(x),      cdata<T>(w),
                          cdata<A>(rstd),   mdata<T>(gx),
                          mdata<T>(gw),     v,
                          A(1) / A(v.cols), x};
  // A one-value grad is read as a scalar: its address needs no alignment.
  if (use_vectors<T>(v, {g.step == 0 ? a.x : a.g, a.x, a.w, a.gx})) {
    launch_backward<T, kVec16<T>>(a, at);
  } else {
    launch_backward<T, 1>(a, at);
  }
}

std::tuple<Tensor, Tensor> rms_norm_backward_cuda(const Tensor& grad_in,
                                                  const Tensor& x_in,
                                                  const Tensor& weight_in,
                                                  const Tensor& rstd_in) {
  rms_norm_checks::check_backward(grad_in, x_in, weight_in, rstd_in);
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const GradView g = grad_view(grad_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(weight_in);
  const Tensor rstd = dense(rstd_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  const RowView v = rows_of(x);
  if (v.rows == 0 || v.cols == 0) {
    return {gx, torch::stable::new_zeros(w, shape_of(w))};  // an empty sum
  }
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  const int device = x.get_device_index();
  const LaunchAt at{device_info(device), device, current_stream(device)};
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    backward_typed<scalar_t>(g, x, w, rstd, gx, gw, v, at);
  });
  return {gx, gw};
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("rms_norm_backward", TORCH_BOX(&rms_norm_backward_cuda));
}

}  // namespace custom_op::cuda
