// CUDA kernels of cross_entropy: the forward (loss, lse) and the backward
// (grad_logits), a block per row (rows blockIdx.x, + gridDim.x, ...).
//
// Forward, one pass over the row (online softmax): each thread keeps the max
// of its elements and the sum of exp(x - max), rescaling the sum when a larger
// max comes, a group of kUnroll vectors at a time; the block merges the
// threads' pairs, and thread 0 writes lse = max + log(sum) and the loss.
// Backward: each thread writes grad * (exp(x - lse) - onehot) for its
// elements; rows whose label is ignore_index are written with zeros and not
// read. A row is read in 16-byte vectors from its first 16-byte boundary, the
// few elements before and after it singly, so any V and any row start get
// vector loads. Accumulation in float32 (float64 for float64); 64-bit
// indices throughout. Labels are not checked on the host (that would
// synchronize): a label outside [0, V) that is not ignore_index gives that
// row a NaN loss and NaN gradients.
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

namespace custom_op::cuda {
namespace {

namespace math = cross_entropy_math;
using cross_entropy_checks::kOp;
using math::Label;

constexpr int kMaxThreads = 512;
// Vectors a thread loads before it uses them: several loads in flight.
constexpr int kUnroll = 4;
// The grid-stride grid caps at this many waves of resident blocks.
constexpr int64_t kMaxWaves = 32;

// A row of `cols` elements at p: `head` elements before its first 16-byte
// boundary, then `vecs` vectors of kVecN, then cols - head - vecs * kVecN
// elements (with kVecN == 1: no head, every element a vector).
struct RowSplit {
  int64_t head;
  int64_t vecs;
};

template <typename T, int kVecN>
__device__ __forceinline__ RowSplit split_row(const T* p, int64_t cols) {
  if constexpr (kVecN == 1) {
    return {0, cols};
  } else {
    const int64_t misaligned =
        int64_t(reinterpret_cast<uintptr_t>(p) % 16) / int64_t(sizeof(T));
    const int64_t to_boundary = (kVecN - misaligned) % kVecN;
    const int64_t head = to_boundary < cols ? to_boundary : cols;
    return {head, (cols - head) / kVecN};
  }
}

// The column of this thread's one element outside the vectors (the head,
// then the tail), or -1 if it has none.
__device__ __forceinline__ int64_t single_column(RowSplit s, int64_t cols,
                                                 int kVecN) {
  const int64_t t = threadIdx.x;
  if (t < s.head) return t;
  const int64_t tail = s.head + s.vecs * kVecN + (t - s.head);
  return tail < cols ? tail : -1;
}

// Adds kN values to a thread's softmax piece: one rescale for the group.
template <typename A, int kN>
__device__ __forceinline__ void add_values(SoftmaxSum<A>& s, const A (&x)[kN]) {
  A m = s.max;
#pragma unroll
  for (int k = 0; k < kN; ++k) m = x[k] > m ? x[k] : m;
  if (m > s.max) {
    s.sum *= softmax_exp(s.max - m);
    s.max = m;
  }
  const A shift = SoftmaxSum<A>::shift(s.max);
  A t = 0;
#pragma unroll
  for (int k = 0; k < kN; ++k) t += softmax_exp(x[k] - shift);
  s.sum += t;
}

// This thread's softmax piece of the row at xr.
template <typename T, int kVecN>
__device__ __forceinline__ SoftmaxSum<acc_t<T>> thread_softmax_sum(
    const T* __restrict__ xr, int64_t cols) {
  using A = acc_t<T>;
  using V = Vec<T, kVecN>;
  SoftmaxSum<A> s = SoftmaxSum<A>::empty();
  const RowSplit split = split_row<T, kVecN>(xr, cols);
  const T* body = xr + split.head;
  const int64_t step = blockDim.x;
  int64_t v = threadIdx.x;
  for (; v + (kUnroll - 1) * step < split.vecs; v += kUnroll * step) {
    V in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      in[u] = load_vec<T, kVecN>(body + (v + u * step) * kVecN);
    }
    A vals[kUnroll * kVecN];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kVecN; ++k) {
        vals[u * kVecN + k] = static_cast<A>(in[u].v[k]);
      }
    }
    add_values(s, vals);
  }
  for (; v < split.vecs; v += step) {
    const V in = load_vec<T, kVecN>(body + v * kVecN);
    A vals[kVecN];
#pragma unroll
    for (int k = 0; k < kVecN; ++k) vals[k] = static_cast<A>(in.v[k]);
    add_values(s, vals);
  }
  const int64_t j = single_column(split, cols, kVecN);
  if (j >= 0) {
    const A vals[1] = {static_cast<A>(xr[j])};
    add_values(s, vals);
  }
  return s;
}

template <typename T, int kVecN>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(const T* __restrict__ x, const int64_t* __restrict__ labels,
                   acc_t<T>* __restrict__ loss, acc_t<T>* __restrict__ lse,
                   int64_t rows, int64_t cols, int64_t ignore_index) {
  using A = acc_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    // Thread 0 reads the label and its logit first: their latency hides
    // behind the pass over the row.
    Label kind = Label::kIgnored;
    A x_label = 0;
    if (threadIdx.x == 0) {
      const int64_t y = labels[r];
      kind = math::classify(y, cols, ignore_index);
      if (kind == Label::kClass) x_label = static_cast<A>(xr[y]);
    }
    const SoftmaxSum<A> s =
        block_softmax_merge(thread_softmax_sum<T, kVecN>(xr, cols));
    if (threadIdx.x == 0) {
      const A l = s.log_sum_exp();
      lse[r] = l;
      loss[r] = kind == Label::kClass     ? math::loss(l, x_label)
                : kind == Label::kIgnored ? A(0)
                                          : A(NAN);
    }
  }
}

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

// Threads per block: about kUnroll vectors each, a multiple of 32.
int threads_for(int64_t cols, int vec_n) {
  const int64_t vecs = ceil_div(cols, vec_n);
  const int64_t threads = ceil_div(ceil_div(vecs, kUnroll), 32) * 32;
  return int(std::clamp<int64_t>(threads, 32, kMaxThreads));
}

unsigned grid_for_rows(int64_t rows, int threads, const DeviceInfo& info) {
  const int64_t resident =
      int64_t(info.sm_count) * std::max(1, info.max_threads_per_sm / threads);
  return static_cast<unsigned>(std::min(rows, resident * kMaxWaves));
}

// The launches live in functions of their own, called from the dispatch
// macro's lambda: written inside it, the commas of <<<grid, threads, 0,
// stream>>> would split the macro's arguments.
template <typename T>
void launch_forward(const T* x, const int64_t* labels, acc_t<T>* loss,
                    acc_t<T>* lse, RowView v, int64_t ignore_index,
                    const DeviceInfo& info, cudaStream_t stream) {
  constexpr int kVecN = kVec16<T>;
  const int threads = threads_for(v.cols, kVecN);
  forward_kernel<T, kVecN>
      <<<grid_for_rows(v.rows, threads, info), threads, 0, stream>>>(
          x, labels, loss, lse, v.rows, v.cols, ignore_index);
  CUSTOM_OP_CHECK_LAUNCH("cross_entropy_forward_kernel");
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

std::tuple<Tensor, Tensor> cross_entropy_forward_cuda(const Tensor& logits_in,
                                                      const Tensor& labels_in,
                                                      int64_t ignore_index) {
  cross_entropy_checks::check_inputs(logits_in, labels_in);
  torch::stable::accelerator::DeviceGuard guard(logits_in.get_device_index());
  const Tensor x = dense(logits_in);
  const Tensor labels = dense(labels_in);
  const RowView v = rows_of(x);
  const auto acc = acc_scalar_type(x.scalar_type());
  Tensor loss = torch::stable::empty({v.rows}, acc, std::nullopt, x.device());
  Tensor lse = torch::stable::empty({v.rows}, acc, std::nullopt, x.device());
  if (v.rows == 0) return {loss, lse};
  const int device = x.get_device_index();
  const DeviceInfo& info = device_info(device);
  cudaStream_t stream = current_stream(device);  // side streams, CUDA graphs
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    using A = acc_t<scalar_t>;
    launch_forward(cdata<scalar_t>(x), cdata<int64_t>(labels), mdata<A>(loss),
                   mdata<A>(lse), v, ignore_index, info, stream);
  });
  return {loss, lse};
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
  m.impl("cross_entropy_forward", TORCH_BOX(&cross_entropy_forward_cuda));
  m.impl("cross_entropy_backward", TORCH_BOX(&cross_entropy_backward_cuda));
}

}  // namespace custom_op::cuda
