#include "weighted_square_backward_cuda.h"

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include "common/cuda_utils.cuh"
#include "common/dispatch.h"
#include "common/tensor_utils.h"
#include "common/vec.cuh"

namespace custom_op::cuda {
namespace {

using weighted_square::WeightForm;

// w has x's shape: both gradients are elementwise, one vector per thread
// (grid_for_each).
template <typename T, int kVecN>
__global__ void __launch_bounds__(kThreads)
    grad_full_kernel(const T* __restrict__ g, const T* __restrict__ x,
                     const T* __restrict__ w, T* __restrict__ gx,
                     T* __restrict__ gw, int64_t n, int64_t g_step) {
  using A = acc_t<T>;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = n / kVecN;
  // Unrolled, this loop would start with a 64-bit trip-count division before
  // the first load.
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
      gxv.v[k] = static_cast<T>(A(2) * static_cast<A>(wv.v[k]) * xf * gf);
      gwv.v[k] = static_cast<T>(xf * xf * gf);
    }
    store_vec(gx + i, gxv);
    store_vec(gw + i, gwv);
  }
  const int64_t i = nvec * kVecN + first;
  if (i < n) {
    const A xf = static_cast<A>(x[i]);
    const A gf = static_cast<A>(g[i * g_step]);
    gx[i] = static_cast<T>(A(2) * static_cast<A>(w[i]) * xf * gf);
    gw[i] = static_cast<T>(xf * xf * gf);
  }
}

// w is 1-D: grad_w[j] sums over rows. Threads are laid out (tx: vector
// column, ty: row); a thread handles rows r_first, r_first + step, ... below
// r_end, kRowsInFlight of them loaded before any is used (one 16-byte load at
// a time left the kernel latency-bound), and keeps its column sums in `acc`.
template <typename T, int kVecN, int kRowsInFlight>
__device__ __forceinline__ void grad_rows(
    const T* __restrict__ g, const T* __restrict__ x, const Vec<T, kVecN>& wv,
    T* __restrict__ gx, acc_t<T>* acc, int64_t c, int64_t r_first,
    int64_t r_end, int64_t step, int64_t cols, int64_t g_step) {
  using A = acc_t<T>;
  for (int64_t r0 = r_first; r0 < r_end; r0 += step * kRowsInFlight) {
    Vec<T, kVecN> xv[kRowsInFlight], gv[kRowsInFlight];
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u) {
      const int64_t r = r0 + u * step;
      if (r < r_end) {
        const int64_t i = r * cols + c * kVecN;
        xv[u] = load_vec<T, kVecN>(x + i);
        gv[u] = load_grad<T, kVecN>(g, i, g_step);
      }
    }
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u) {
      const int64_t r = r0 + u * step;
      if (r < r_end) {
        Vec<T, kVecN> gxv;
#pragma unroll
        for (int k = 0; k < kVecN; ++k) {
          const A xf = static_cast<A>(xv[u].v[k]);
          const A gf = static_cast<A>(gv[u].v[k]);
          gxv.v[k] = static_cast<T>(A(2) * static_cast<A>(wv.v[k]) * xf * gf);
          acc[k] += xf * xf * gf;
        }
        store_vec(gx + r * cols + c * kVecN, gxv);
      }
    }
  }
}

// Which rows a block sums. With `counters` (one per column block), the blocks
// of one resident wave take chunks of chunk_rows adjacent rows from it until
// none are left, so the rows in flight stay one compact window of memory
// (blocks that walk fixed grid-strided rows drift apart over it). Which block
// sums
// which rows then depends on timing, so grad_w's rounding can differ from run
// to run. Without counters (deterministic), rows are grid-strided in a fixed
// order. Each block reduces its column sums over ty in shared memory and
// writes one partial row (or grad_w itself when gridDim.y == 1), or, with
// `finished` (a counter per column block), adds them into one row of
// `partial`, and the column block's last block to finish writes grad_w.
template <typename T, int kVecN, int kRowsInFlight>
__global__ void __launch_bounds__(kThreads)
    grad_per_feature_kernel(const T* __restrict__ g, const T* __restrict__ x,
                            const T* __restrict__ w, T* __restrict__ gx,
                            T* __restrict__ gw, acc_t<T>* __restrict__ partial,
                            unsigned long long* __restrict__ counters,
                            unsigned long long* __restrict__ finished,
                            int64_t rows, int64_t cols, int64_t chunk_rows,
                            int64_t g_step) {
  using A = acc_t<T>;
  __shared__ A sums[kThreads * kVecN];
  __shared__ int64_t chunk_begin;
  const int64_t vcols = cols / kVecN;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  A acc[kVecN] = {};
  Vec<T, kVecN> wv{};
  if (c < vcols) wv = load_vec<T, kVecN>(w + c * kVecN);
  if (counters == nullptr) {
    if (c < vcols) {
      grad_rows<T, kVecN, kRowsInFlight>(
          g, x, wv, gx, acc, c, int64_t(blockIdx.y) * blockDim.y + threadIdx.y,
          rows, int64_t(gridDim.y) * blockDim.y, cols, g_step);
    }
  } else {
    const bool lead = threadIdx.x == 0 && threadIdx.y == 0;
    for (;;) {
      if (lead) {
        chunk_begin =
            int64_t(atomicAdd(counters + blockIdx.x, 1ull)) * chunk_rows;
      }
      __syncthreads();
      const int64_t r_begin = chunk_begin;
      __syncthreads();  // every thread has read chunk_begin before it changes
      if (r_begin >= rows) break;
      if (c < vcols) {
        grad_rows<T, kVecN, kRowsInFlight>(
            g, x, wv, gx, acc, c, r_begin + threadIdx.y,
            std::min(rows, r_begin + chunk_rows), blockDim.y, cols, g_step);
      }
    }
  }
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) sums[t * kVecN + k] = acc[k];
  __syncthreads();
  const bool writer = threadIdx.y == 0 && c < vcols;
  if (writer) {
#pragma unroll
    for (int k = 0; k < kVecN; ++k) {
      A s = 0;
      for (int y = 0; y < int(blockDim.y); ++y) {
        s += sums[(y * blockDim.x + threadIdx.x) * kVecN + k];
      }
      const int64_t j = c * kVecN + k;
      if (gridDim.y == 1) {
        gw[j] = static_cast<T>(s);
      } else if (finished != nullptr) {
        atomicAdd(partial + j, s);
      } else {
        partial[int64_t(blockIdx.y) * cols + j] = s;
      }
    }
  }
  if (finished == nullptr || gridDim.y == 1) return;
  // Fenced: every block's adds are visible before its count is.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    last = atomicAdd(finished + blockIdx.x, 1ull) == gridDim.y - 1;
  }
  __syncthreads();
  if (!last || !writer) return;
  __threadfence();
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    const int64_t j = c * kVecN + k;
    gw[j] = static_cast<T>(__ldcg(partial + j));
  }
}

// grad_w[j] = sum of the partial rows' column j. A block takes 32 columns
// (coalesced reads) and spreads the partial rows over 32 threads per column, so
// no thread sums more than parts / 32 values one after another (one thread per
// column was latency-bound: 2112 loads in a row).
constexpr int kFinishColumns = 32;
constexpr int kFinishParts = 32;

template <typename T>
__global__ void __launch_bounds__(kFinishColumns* kFinishParts)
    finish_columns_kernel(const acc_t<T>* __restrict__ partial,
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

template <typename T, int kVecN>
void launch_full(const T* g, const T* x, const T* w, T* gx, T* gw, int64_t n,
                 int64_t g_step, cudaStream_t stream) {
  // As the forward: one vector per thread.
  const unsigned grid = grid_for_each(ceil_div(n / kVecN, kThreads));
  grad_full_kernel<T, kVecN>
      <<<grid, kThreads, 0, stream>>>(g, x, w, gx, gw, n, g_step);
  CUSTOM_OP_CHECK_LAUNCH("grad_full_kernel");
}

// Rows in flight per thread and rows per chunk (in steps of blockDim.y rows
// times the rows in flight) of the dynamically scheduled kernel, as measured
// best: 2-byte types hold fewer registers with 2 in flight, so more blocks
// fit, and take longer chunks.
template <typename T>
constexpr int kDynamicRowsInFlight = sizeof(T) == 2 ? 2 : 4;
template <typename T>
constexpr int kDynamicChunkSteps = sizeof(T) == 2 ? 4 : 1;

// Blocks per column block up to which the dynamic kernel adds its column
// sums atomically instead of writing partial rows for finish_columns_kernel:
// with more, the adds to one address queue.
constexpr int64_t kMaxAddsPerColumn = 64;

// Where and how a backward runs.
struct GradLaunch {
  const DeviceInfo& info;
  int device;
  cudaStream_t stream;
  bool deterministic;  // grad_w summed in a fixed order
  int64_t g_step;      // the grad's GradView step
};

template <typename T, int kVecN>
void launch_per_feature(const Tensor& like, const T* g, const T* x, const T* w,
                        T* gx, T* gw, int64_t rows, int64_t cols,
                        const GradLaunch& at) {
  using A = acc_t<T>;
  const DeviceInfo& info = at.info;
  cudaStream_t stream = at.stream;
  const int64_t vcols = cols / kVecN;
  int tx = 1;
  while (tx < 32 && tx < vcols) tx *= 2;
  const int ty = kThreads / tx;
  const int64_t grid_x = ceil_div(vcols, tx);
  constexpr int kFlight = kDynamicRowsInFlight<T>;
  constexpr auto dynamic_kernel = grad_per_feature_kernel<T, kVecN, kFlight>;
  constexpr auto strided_kernel = grad_per_feature_kernel<T, kVecN, 4>;
  // 2-byte rows narrower than a warp of vectors take chunks of 2 steps (it
  // helps them and loses elsewhere).
  const int64_t chunk_steps =
      sizeof(T) == 2 && tx < 32 ? 2 : kDynamicChunkSteps<T>;
  const int64_t chunk_rows = chunk_steps * kFlight * ty;
  // Dynamic: at most one resident wave of blocks, so every column block's
  // blocks run at once and share its rows. Strided: two waves, as measured.
  int64_t grid_y = 0;
  if (at.deterministic) {
    grid_y = std::min(ceil_div(rows, ty),
                      ceil_div(2 * info.resident_blocks(), grid_x));
  } else {
    const int64_t wave =
        int64_t(info.sm_count) * blocks_per_sm<dynamic_kernel>(at.device);
    grid_y = std::min(ceil_div(rows, chunk_rows), wave / grid_x);
  }
  grid_y = std::clamp<int64_t>(grid_y, 1, 65535);
  const bool dynamic = !at.deterministic && grid_y > 1;
  // Few blocks per column block add their sums into one row: no partial rows
  // and no second kernel. Many contend for the same addresses and write
  // partial rows instead.
  const bool add_sums = dynamic && grid_y <= kMaxAddsPerColumn;
  A* partial = nullptr;
  unsigned long long* counters = nullptr;
  unsigned long long* finished = nullptr;
  Tensor workspace;
  if (grid_y > 1) {
    // One allocation: the partial rows (one when adding), then (dynamic) a
    // chunk counter per column block and (adding) a finished-block counter
    // per column block.
    const int64_t partial_words =
        ceil_div((add_sums ? 1 : grid_y) * cols * int64_t(sizeof(A)), 8);
    const int64_t counter_words = dynamic ? (add_sums ? 2 : 1) * grid_x : 0;
    workspace = torch::stable::empty({partial_words + counter_words},
                                     torch::headeronly::ScalarType::Long,
                                     std::nullopt, like.device());
    int64_t* words = mdata<int64_t>(workspace);
    partial = reinterpret_cast<A*>(words);
    if (dynamic) {
      counters = reinterpret_cast<unsigned long long*>(words + partial_words);
      if (add_sums) finished = counters + grid_x;
      // Zeroed on the stream: the counters, and the summed row when adding.
      const int64_t first = add_sums ? 0 : partial_words;
      CUSTOM_OP_CUDA_CHECK(
          cudaMemsetAsync(words + first, 0,
                          (partial_words + counter_words - first) * 8, stream));
    }
  }
  const dim3 grid{unsigned(grid_x), unsigned(grid_y)};
  const auto kernel = dynamic ? dynamic_kernel : strided_kernel;
  kernel<<<grid, dim3(tx, ty), 0, stream>>>(g, x, w, gx, gw, partial, counters,
                                            finished, rows, cols, chunk_rows,
                                            at.g_step);
  CUSTOM_OP_CHECK_LAUNCH("grad_per_feature_kernel");
  if (grid_y > 1 && !add_sums) {
    finish_columns_kernel<T><<<unsigned(ceil_div(cols, kFinishColumns)),
                               dim3(kFinishColumns, kFinishParts), 0, stream>>>(
        partial, gw, grid_y, cols);
    CUSTOM_OP_CHECK_LAUNCH("finish_columns_kernel");
  }
}

template <typename T>
void launch_grad(const Tensor& g, const Tensor& x, const Tensor& w, Tensor& gx,
                 Tensor& gw, WeightForm form, const GradLaunch& at) {
  const T* gp = cdata<T>(g);
  const T* xp = cdata<T>(x);
  const T* wp = cdata<T>(w);
  T* gxp = mdata<T>(gx);
  T* gwp = mdata<T>(gw);
  constexpr int kVecN = kVec16<T>;
  const bool aligned = (at.g_step == 0 || is_aligned16(gp)) &&
                       is_aligned16(xp) && is_aligned16(wp) &&
                       is_aligned16(gxp) && is_aligned16(gwp);
  if (form == WeightForm::Full) {
    const int64_t n = x.numel();
    if (aligned) {
      launch_full<T, kVecN>(gp, xp, wp, gxp, gwp, n, at.g_step, at.stream);
    } else {
      launch_full<T, 1>(gp, xp, wp, gxp, gwp, n, at.g_step, at.stream);
    }
    return;
  }
  const RowView v = rows_of(x);
  if (aligned && v.cols % kVecN == 0) {
    launch_per_feature<T, kVecN>(x, gp, xp, wp, gxp, gwp, v.rows, v.cols, at);
  } else {
    launch_per_feature<T, 1>(x, gp, xp, wp, gxp, gwp, v.rows, v.cols, at);
  }
}

}  // namespace

std::tuple<Tensor, Tensor> weighted_square_grad(const Tensor& grad_in,
                                                const Tensor& x_in,
                                                const Tensor& w_in,
                                                WeightForm form,
                                                bool deterministic) {
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const GradView grad = grad_view(grad_in);
  const Tensor& g = grad.data;
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  if (x.numel() == 0) {
    return {gx, torch::stable::new_zeros(w, shape_of(w))};
  }
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  const int device = x.get_device_index();
  const GradLaunch at{device_info(device), device, current_stream(device),
                      deterministic, grad.step};
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(
      x.scalar_type(), "weighted_square_grad",
      [&] { launch_grad<scalar_t>(g, x, w, gx, gw, form, at); });
  return {gx, gw};
}

}  // namespace custom_op::cuda
