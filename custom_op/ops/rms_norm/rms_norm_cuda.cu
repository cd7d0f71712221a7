// CUDA kernels of rms_norm: RMSNorm over the last dimension, the forward (y,
// rstd) and the fused backward (grad_x, grad_weight).
//
// A block takes a whole row (H = x.shape[-1] elements), each thread the
// vectors threadIdx.x, threadIdx.x + blockDim.x, ... of it: 16-byte vectors
// when H and the pointers allow, else single elements, so any H works. Rows
// of up to 4-8 (forward) or 2-4 (backward) vectors per thread stay in registers
// between the pass that sums over the row and the pass that writes it; longer
// rows are read again in the second pass (the forward's from L2, where an
// eviction hint on the first pass keeps them). The backward of 16-byte rows
// copies x and grad rows ahead into shared memory instead (cp.async), where
// they fit. grad_weight is summed
// per block (a long row's sums in shared memory, as many columns as it holds),
// then over blocks in a fixed order: no atomics, the same bits on every run.
// 64-bit indices throughout.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <initializer_list>
#include <tuple>
#include <type_traits>

#include "common/async_copy.cuh"
#include "common/checks.h"
#include "common/cuda_utils.cuh"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/reduce.cuh"
#include "common/tensor_utils.h"
#include "common/vec.cuh"
#include "rms_norm_checks.h"
#include "rms_norm_math.h"

namespace custom_op::cuda {
namespace {

namespace math = rms_norm_math;
using rms_norm_checks::kOp;

// Threads per block: at most 512, with several vectors per thread rather
// than more threads: small blocks keep more rows in flight per
// multiprocessor.
constexpr int kMaxThreads = 512;
// kItems: vectors of a row each thread keeps in registers, 1, 2, 4 or 8;
// kUncached for rows longer than that, read again in the second pass.
constexpr int kUncached = 0;
// Vectors per thread the plan aims at, and the most kept in registers. A
// 4-byte type's rows past 4 vectors are read twice: registers run out. The
// backward keeps x, grad, w, its grad_weight sums and the next row's loads
// there: more than 2 vectors of a 2-byte type spill.
constexpr int kForwardItems = 4;
template <typename T>
constexpr int kMaxForwardItems = sizeof(T) == 4 ? 4 : 8;
constexpr int kBackwardItems = 1;
template <typename T>
constexpr int kMaxBackwardItems = sizeof(T) == 2 ? 2 : 4;
// The staged backward holds no next row in registers: up to 4 vectors of any
// type. Its shared memory stages: 4-byte and wider types gain from 3 rows in
// flight where they fit; 2-byte types hold as many bytes in flight with 1.
constexpr int kMaxStagedItems = 4;
template <typename T>
constexpr int kMostStages = sizeof(T) >= 4 ? 4 : 2;
// The forward's grid-stride grid caps at this many waves of resident blocks.
constexpr int64_t kMaxWaves = 32;

// The forward's rows of 4 or 8 vectors per thread take at most 64 registers,
// so that two blocks of 512 threads share a multiprocessor: one block alone
// cannot keep the memory busy. bfloat16 spills there at 8 vectors, so it
// keeps its registers.
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

// This thread's vectors of a row are at offsets first + i * stride (first =
// threadIdx.x * kVecN, stride = blockDim.x * kVecN); this many of the first
// kItems lie within a row of vcols vectors, the same for every row.
template <int kItems>
__device__ __forceinline__ int thread_items(int64_t vcols) {
  const int64_t n = (vcols - threadIdx.x + blockDim.x - 1) / blockDim.x;
  return n < 0 ? 0 : n > kItems ? kItems : int(n);
}

// y and rstd, a row per block (rows blockIdx.x, + gridDim.x, ...).
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
    if constexpr (kItems != kUncached) {
      const int items = thread_items<kItems>(cols / kVecN);
      // x is read once, yet loaded evict_last, as a two-pass kernel's first
      // pass loads it: the forward keeps up with such a kernel only with the
      // hint, and leaves L2 as it does.
      V xv[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        if (i < items) {
          xv[i] =
              load_vec_evict<Evict::kLast, T, kVecN>(xr + first + i * stride);
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
          store_vec(yr + at,
                    forward_vec(xv[i], load_vec<T, kVecN>(w + at), rs));
        }
      }
    } else {
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
        s4[0] +=
            sum_of_squares(load_vec_evict<Evict::kLast, T, kVecN>(xr + at));
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
}

// grad_x, and block b's grad_weight sums over its rows (b, b + gridDim.x, ...)
// in partial[b, :]. gridDim.x <= rows: every block has a row.
template <typename T, int kVecN, int kItems>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(const T* __restrict__ g, const T* __restrict__ x,
                    const T* __restrict__ w, const acc_t<T>* __restrict__ rstd,
                    T* __restrict__ gx, acc_t<T>* __restrict__ partial,
                    int64_t rows, int64_t cols, acc_t<T> inv_cols,
                    int64_t g_step, int64_t shared_cols) {
  using A = acc_t<T>;
  using V = Vec<T, kVecN>;
  const int64_t first = int64_t(threadIdx.x) * kVecN;
  const int64_t stride = int64_t(blockDim.x) * kVecN;
  A* part = partial + int64_t(blockIdx.x) * cols;
  if constexpr (kItems != kUncached) {
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
  } else {
    // Columns below shared_cols (a multiple of kVecN) sum in shared memory,
    // the rest in the partial row; each column belongs to one thread, which
    // zeroes it first and copies it out last: no barrier. In registers the
    // sums would leave room for one block of 512 threads a multiprocessor,
    // not two.
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
        store_vec(gx + r * cols + at,
                  backward_vec(
                      load_grad_evict<Evict::kFirst, T, kVecN>(gr, at, g_step),
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

// grad_weight[j] = sum of partial[:, j] in a fixed order. A block takes 32
// columns (coalesced reads) and spreads the partial rows over 32 threads per
// column, then sums the 32 threads' sums in order.
constexpr int kFinishColumns = 32;
constexpr int kFinishParts = 32;

template <typename T>
__global__ void __launch_bounds__(kFinishColumns* kFinishParts)
    finish_grad_weight_kernel(const acc_t<T>* __restrict__ partial,
                              T* __restrict__ gw, int64_t parts, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A sums[kFinishParts][kFinishColumns + 1];  // +1: no bank conflicts
  const int64_t j = int64_t(blockIdx.x) * kFinishColumns + threadIdx.x;
  A s = 0;
  if (j < cols) {
    for (int64_t p = threadIdx.y; p < parts; p += kFinishParts) {
      s += partial[p * cols + j];
    }
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  A total = 0;
#pragma unroll
  for (int y = 0; y < kFinishParts; ++y) total += sums[y][threadIdx.x];
  gw[j] = static_cast<T>(total);
}

// How a row is spread over a block: `items` vectors per thread (kUncached:
// the row is read twice), `threads` a multiple of 32.
struct RowPlan {
  int items;
  int threads;
};

// `target` vectors per thread (fewer for rows of less than 32 * target), more
// up to max_items where 512 threads would not cover the row; past that, the
// row is read twice.
RowPlan plan_row(int64_t vcols, int target, int max_items) {
  int items = 1;
  while (items < target && items * 32 < vcols) items *= 2;
  while (items < max_items && items * int64_t(kMaxThreads) < vcols) items *= 2;
  const int64_t threads = ceil_div(ceil_div(vcols, items), 32) * 32;
  if (threads > kMaxThreads) return {kUncached, kMaxThreads};
  return {items, int(std::max<int64_t>(32, threads))};
}

// Calls launch(std::integral_constant<int, items>()) for items of 1, 2, 4 or 8
// up to kMaxItems (the kernel's template argument), else with kUncached.
template <int kMaxItems, typename Launch>
void dispatch_items(int items, const Launch& launch) {
  using std::integral_constant;
  if (items == 1) return launch(integral_constant<int, 1>());
  if constexpr (kMaxItems >= 2) {
    if (items == 2) return launch(integral_constant<int, 2>());
  }
  if constexpr (kMaxItems >= 4) {
    if (items == 4) return launch(integral_constant<int, 4>());
  }
  if constexpr (kMaxItems >= 8) {
    if (items == 8) return launch(integral_constant<int, 8>());
  }
  launch(integral_constant<int, kUncached>());
}

// The launches live in functions of their own, called from the dispatch
// macro's lambda: written inside it, the commas of <<<grid, threads, 0,
// stream>>> would split the macro's arguments.
template <typename T, int kVecN, int kItems>
void launch_forward_kernel(const T* x, const T* w, T* y, acc_t<T>* rstd,
                           RowView v, acc_t<T> inv_cols, acc_t<T> eps,
                           int threads, const DeviceInfo& info,
                           cudaStream_t stream) {
  const int64_t resident =
      int64_t(info.sm_count) * std::max(1, info.max_threads_per_sm / threads);
  const auto grid =
      static_cast<unsigned>(std::min(v.rows, resident * kMaxWaves));
  forward_kernel<T, kVecN, kItems><<<grid, threads, 0, stream>>>(
      x, w, y, rstd, v.rows, v.cols, inv_cols, eps);
  CUSTOM_OP_CHECK_LAUNCH("rms_norm_forward_kernel");
}

template <typename T, int kVecN>
void launch_forward(const T* x, const T* w, T* y, acc_t<T>* rstd, RowView v,
                    acc_t<T> inv_cols, acc_t<T> eps, const DeviceInfo& info,
                    cudaStream_t stream) {
  const RowPlan plan =
      plan_row(v.cols / kVecN, kForwardItems, kMaxForwardItems<T>);
  dispatch_items<kMaxForwardItems<T>>(plan.items, [&](auto items) {
    launch_forward_kernel<T, kVecN, decltype(items)::value>(
        x, w, y, rstd, v, inv_cols, eps, plan.threads, info, stream);
  });
}

template <typename T>
void finish_grad_weight(const acc_t<T>* partial, T* gw, int64_t blocks,
                        int64_t cols, cudaStream_t stream) {
  finish_grad_weight_kernel<T>
      <<<unsigned(ceil_div(cols, kFinishColumns)),
         dim3(kFinishColumns, kFinishParts), 0, stream>>>(partial, gw, blocks,
                                                          cols);
  CUSTOM_OP_CHECK_LAUNCH("rms_norm_finish_grad_weight_kernel");
}

// A backward kernel over as many blocks as are resident at once, each summing
// its rows' grad_weight terms into its own row of partial sums, then those
// rows summed into gw: a fixed grid, so the same rows meet in the same order on
// every run. launch(blocks, partial) starts the kernel.
template <typename T, auto kKernel, typename Launch>
void launch_with_partial_sums(RowView v, int threads, size_t shared_bytes,
                              T* gw, const Tensor& like, const DeviceInfo& info,
                              cudaStream_t stream, const Launch& launch) {
  const int64_t blocks =
      std::min(v.rows, int64_t(info.sm_count) *
                           blocks_per_sm<kKernel>(like.get_device_index(),
                                                  threads, shared_bytes));
  Tensor partial = torch::stable::empty({blocks, v.cols},
                                        acc_scalar_type(like.scalar_type()),
                                        std::nullopt, like.device());
  acc_t<T>* pp = mdata<acc_t<T>>(partial);
  launch(unsigned(blocks), pp);
  finish_grad_weight<T>(pp, gw, blocks, v.cols, stream);
}

template <typename T, int kVecN, int kItems>
void launch_backward_kernel(const T* g, int64_t g_step, const T* x, const T* w,
                            const acc_t<T>* rstd, T* gx, T* gw, RowView v,
                            acc_t<T> inv_cols, int threads, const Tensor& like,
                            const DeviceInfo& info, cudaStream_t stream) {
  constexpr auto kKernel = backward_kernel<T, kVecN, kItems>;
  int64_t shared_cols = 0;
  size_t shared_bytes = 0;
  if constexpr (kItems == kUncached) {
    const int64_t fit =
        max_dynamic_smem<kKernel>(like.get_device_index(), info) /
        int64_t(sizeof(acc_t<T>) * kVecN) * kVecN;
    shared_cols = std::min(v.cols, fit);
    shared_bytes = size_t(shared_cols) * sizeof(acc_t<T>);
  }
  launch_with_partial_sums<T, kKernel>(
      v, threads, shared_bytes, gw, like, info, stream,
      [&](unsigned blocks, acc_t<T>* pp) {
        kKernel<<<blocks, threads, shared_bytes, stream>>>(
            g, x, w, rstd, gx, pp, v.rows, v.cols, inv_cols, g_step,
            shared_cols);
        CUSTOM_OP_CHECK_LAUNCH("rms_norm_backward_kernel");
      });
}

// false, launching nothing, where kStages rows of x and grad do not fit in a
// block's shared memory.
template <typename T, int kItems, int kStages>
bool launch_backward_staged_kernel(const T* g, const T* x, const T* w,
                                   const acc_t<T>* rstd, T* gx, T* gw,
                                   RowView v, acc_t<T> inv_cols, int threads,
                                   const Tensor& like, const DeviceInfo& info,
                                   cudaStream_t stream) {
  constexpr auto kKernel = backward_staged_kernel<T, kItems, kStages>;
  const int64_t bytes = int64_t(kStages) * 2 * v.cols * int64_t(sizeof(T));
  if (bytes > max_dynamic_smem<kKernel>(like.get_device_index(), info))
    return false;
  const auto shared_bytes = size_t(bytes);
  launch_with_partial_sums<T, kKernel>(
      v, threads, shared_bytes, gw, like, info, stream,
      [&](unsigned blocks, acc_t<T>* pp) {
        kKernel<<<blocks, threads, shared_bytes, stream>>>(
            g, x, w, rstd, gx, pp, v.rows, v.cols, inv_cols);
        CUSTOM_OP_CHECK_LAUNCH("rms_norm_backward_staged_kernel");
      });
  return true;
}

// The staged backward, the most stages that fit; false where none do or the
// row is longer than kMaxStagedItems vectors a thread.
template <typename T>
bool launch_backward_staged(const T* g, const T* x, const T* w,
                            const acc_t<T>* rstd, T* gx, T* gw, RowView v,
                            acc_t<T> inv_cols, const Tensor& like,
                            const DeviceInfo& info, cudaStream_t stream) {
  const RowPlan plan =
      plan_row(v.cols / kVec16<T>, kBackwardItems, kMaxStagedItems);
  bool launched = false;
  dispatch_items<kMaxStagedItems>(plan.items, [&](auto items) {
    constexpr int kItems = decltype(items)::value;
    if constexpr (kItems != kUncached) {
      launched = launch_backward_staged_kernel<T, kItems, kMostStages<T>>(
          g, x, w, rstd, gx, gw, v, inv_cols, plan.threads, like, info, stream);
      if constexpr (kMostStages<T> > 2) {
        if (!launched) {
          launched = launch_backward_staged_kernel<T, kItems, 2>(
              g, x, w, rstd, gx, gw, v, inv_cols, plan.threads, like, info,
              stream);
        }
      }
    }
  });
  return launched;
}

template <typename T, int kVecN>
void launch_backward(const T* g, int64_t g_step, const T* x, const T* w,
                     const acc_t<T>* rstd, T* gx, T* gw, RowView v,
                     acc_t<T> inv_cols, const Tensor& like,
                     const DeviceInfo& info, cudaStream_t stream) {
  // 16-bit types only: for float32 the register kernel is as fast or faster.
  if constexpr (kVecN == kVec16<T> && sizeof(T) == 2) {
    // Older GPUs have no asynchronous copy to overlap with the rows' math.
    if (g_step == 1 && info.major >= 8 &&
        launch_backward_staged<T>(g, x, w, rstd, gx, gw, v, inv_cols, like,
                                  info, stream)) {
      return;
    }
  }
  constexpr int kMaxItems = kMaxBackwardItems<T>;
  const RowPlan plan = plan_row(v.cols / kVecN, kBackwardItems, kMaxItems);
  dispatch_items<kMaxItems>(plan.items, [&](auto items) {
    launch_backward_kernel<T, kVecN, decltype(items)::value>(
        g, g_step, x, w, rstd, gx, gw, v, inv_cols, plan.threads, like, info,
        stream);
  });
}

// 16-byte vectors when every row starts 16-byte aligned.
template <typename T>
bool use_vectors(RowView v, std::initializer_list<const void*> pointers) {
  if (v.cols % kVec16<T> != 0) return false;
  return std::all_of(pointers.begin(), pointers.end(), is_aligned16);
}

template <typename T>
void forward_typed(const Tensor& x, const Tensor& w, Tensor& y, Tensor& rstd,
                   RowView v, double eps, const DeviceInfo& info,
                   cudaStream_t stream) {
  using A = acc_t<T>;
  const T* xp = cdata<T>(x);
  const T* wp = cdata<T>(w);
  T* yp = mdata<T>(y);
  A* rp = mdata<A>(rstd);
  const A inv_cols = A(1) / A(v.cols);
  if (use_vectors<T>(v, {xp, wp, yp})) {
    launch_forward<T, kVec16<T>>(xp, wp, yp, rp, v, inv_cols, A(eps), info,
                                 stream);
  } else {
    launch_forward<T, 1>(xp, wp, yp, rp, v, inv_cols, A(eps), info, stream);
  }
}

template <typename T>
void backward_typed(const GradView& g, const Tensor& x, const Tensor& w,
                    const Tensor& rstd, Tensor& gx, Tensor& gw, RowView v,
                    const DeviceInfo& info, cudaStream_t stream) {
  using A = acc_t<T>;
  const T* gp = cdata<T>(g.data);
  const T* xp = cdata<T>(x);
  const T* wp = cdata<T>(w);
  const A* rp = cdata<A>(rstd);
  T* gxp = mdata<T>(gx);
  T* gwp = mdata<T>(gw);
  const A inv_cols = A(1) / A(v.cols);
  // A one-value grad is read as a scalar: its address needs no alignment.
  if (use_vectors<T>(v, {g.step == 0 ? xp : gp, xp, wp, gxp})) {
    launch_backward<T, kVec16<T>>(gp, g.step, xp, wp, rp, gxp, gwp, v, inv_cols,
                                  x, info, stream);
  } else {
    launch_backward<T, 1>(gp, g.step, xp, wp, rp, gxp, gwp, v, inv_cols, x,
                          info, stream);
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
  Tensor rstd = torch::stable::empty(shape_without_last_dim(x),
                                     acc_scalar_type(x.scalar_type()),
                                     std::nullopt, x.device());
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
  const DeviceInfo& info = device_info(device);
  cudaStream_t stream = current_stream(device);  // side streams, CUDA graphs
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    forward_typed<scalar_t>(x, w, y, rstd, v, eps, info, stream);
  });
  return {y, rstd};
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
  const DeviceInfo& info = device_info(device);
  cudaStream_t stream = current_stream(device);
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    backward_typed<scalar_t>(g, x, w, rstd, gx, gw, v, info, stream);
  });
  return {gx, gw};
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("rms_norm_forward", TORCH_BOX(&rms_norm_forward_cuda));
  m.impl("rms_norm_backward", TORCH_BOX(&rms_norm_backward_cuda));
}

}  // namespace custom_op::cuda
