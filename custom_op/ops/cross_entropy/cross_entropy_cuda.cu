// CUDA kernels of cross_entropy's forward (loss, lse), a block per row
// (cross_entropy_rows.cuh). One pass over the row (online softmax): each
// thread keeps the max of its elements and the sum of exp(x - max), rescaling
// the sum when a larger max comes, a group of kUnroll vectors at a time; the
// block merges the threads' pairs, and thread 0 writes lse = max + log(sum)
// and the loss.
// Accumulation in float32 (float64 for float64); 64-bit indices throughout.
// Labels are not checked on the host (that would synchronize): a label
// outside [0, V) that is not ignore_index gives that row a NaN loss.
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

std::tuple<Tensor, Tensor> cross_entropy_forward_cuda(const Tensor& logits_in,
                                                      const Tensor& labels_in,
                                                      int64_t ignore_index) {
  cross_entropy_checks::check_inputs(logits_in, labels_in);
  torch::stable::accelerator::DeviceGuard guard(logits_in.get_device_index());
  const Tensor x = dense(logits_in);
  const Tensor labels = dense(labels_in);
  const RowView v = rows_of(x);
  Tensor loss = empty_acc_with_shape(x, {v.rows});
  Tensor lse = empty_acc_with_shape(x, {v.rows});
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

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("cross_entropy_forward", TORCH_BOX(&cross_entropy_forward_cuda));
}

}  // namespace custom_op::cuda
