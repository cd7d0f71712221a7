#include "weighted_grad_cuda.h"

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include "cuda_utils.cuh"
#include "dispatch.h"
#include "tensor_utils.h"
#include "vec.cuh"

namespace custom_op::cuda {
namespace {

// w has x's shape: both gradients are elementwise. kPerRow reads grad[row]
// (row = i / cols; cols % kVecN == 0 on the vector path, so a vector never
// straddles rows), kept by a row and column counter that advance by a fixed
// step per iteration, as the forward's column counter: adds instead of a
// 64-bit division per vector (the forward lost 7% to one; here it measured
// the same either way, 97.9% of copy at 1048576x128). Otherwise grad[i].
template <typename T, int kVecN, bool kPerRow>
__global__ void __launch_bounds__(kThreads)
    grad_full_kernel(const T* __restrict__ g, const T* __restrict__ x,
                     const T* __restrict__ w, T* __restrict__ gx,
                     T* __restrict__ gw, int64_t n, int64_t cols) {
  using A = acc_t<T>;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = n / kVecN;
  int64_t row = 0, col = 0, row_step = 0, col_step = 0;
  if constexpr (kPerRow) {
    row = first * kVecN / cols;
    col = first * kVecN % cols;
    row_step = stride * kVecN / cols;
    col_step = stride * kVecN % cols;
  }
  for (int64_t v = first; v < nvec; v += stride) {
    const int64_t i = v * kVecN;
    const auto xv = load_vec<T, kVecN>(x + i);
    const auto wv = load_vec<T, kVecN>(w + i);
    Vec<T, kVecN> gv;
    if constexpr (kPerRow) {
      const T gr = g[row];
#pragma unroll
      for (int k = 0; k < kVecN; ++k) gv.v[k] = gr;
      row += row_step;
      col += col_step;
      if (col >= cols) {
        col -= cols;
        ++row;
      }
    } else {
      gv = load_vec<T, kVecN>(g + i);
    }
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
    const A gf = static_cast<A>(kPerRow ? g[i / cols] : g[i]);
    gx[i] = static_cast<T>(A(2) * static_cast<A>(w[i]) * xf * gf);
    gw[i] = static_cast<T>(xf * xf * gf);
  }
}

// w is 1-D: grad_w[j] sums over rows. Threads are laid out (tx: vector
// column, ty: row); each block walks a strided set of rows, keeps its column
// sums in registers, reduces them over ty in shared memory and writes one
// partial row (or grad_w itself when gridDim.y == 1). Each thread loads
// kRowsInFlight rows before using any, so several 16-byte loads per thread
// are in flight (one at a time left the kernel latency-bound).
constexpr int kRowsInFlight = 4;

template <typename T, int kVecN, bool kPerRow>
__global__ void __launch_bounds__(kThreads)
    grad_per_feature_kernel(const T* __restrict__ g, const T* __restrict__ x,
                            const T* __restrict__ w, T* __restrict__ gx,
                            T* __restrict__ gw, acc_t<T>* __restrict__ partial,
                            int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A sums[kThreads * kVecN];
  const int64_t vcols = cols / kVecN;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  A acc[kVecN] = {};
  if (c < vcols) {
    const auto wv = load_vec<T, kVecN>(w + c * kVecN);
    const int64_t step = int64_t(gridDim.y) * blockDim.y;
    for (int64_t r0 = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r0 < rows;
         r0 += step * kRowsInFlight) {
      Vec<T, kVecN> xv[kRowsInFlight], gv[kRowsInFlight];
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) {
        const int64_t r = r0 + u * step;
        if (r < rows) {
          const int64_t i = r * cols + c * kVecN;
          xv[u] = load_vec<T, kVecN>(x + i);
          if constexpr (kPerRow) {
            const T gr = g[r];
#pragma unroll
            for (int k = 0; k < kVecN; ++k) gv[u].v[k] = gr;
          } else {
            gv[u] = load_vec<T, kVecN>(g + i);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) {
        const int64_t r = r0 + u * step;
        if (r < rows) {
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
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) sums[t * kVecN + k] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= vcols) return;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    A s = 0;
    for (int y = 0; y < int(blockDim.y); ++y) {
      s += sums[(y * blockDim.x + threadIdx.x) * kVecN + k];
    }
    const int64_t j = c * kVecN + k;
    if (gridDim.y == 1) {
      gw[j] = static_cast<T>(s);
    } else {
      partial[int64_t(blockIdx.y) * cols + j] = s;
    }
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

template <typename T, int kVecN, bool kPerRow>
void launch_full(const T* g, const T* x, const T* w, T* gx, T* gw, int64_t n,
                 int64_t cols, const DeviceInfo& info, cudaStream_t stream) {
  const unsigned grid = grid_for(ceil_div(n / kVecN, kThreads), info);
  grad_full_kernel<T, kVecN, kPerRow>
      <<<grid, kThreads, 0, stream>>>(g, x, w, gx, gw, n, cols);
  CUSTOM_OP_CHECK_LAUNCH("grad_full_kernel");
}

template <typename T, int kVecN, bool kPerRow>
void launch_per_feature(const Tensor& like, const T* g, const T* x, const T* w,
                        T* gx, T* gw, int64_t rows, int64_t cols,
                        const DeviceInfo& info, cudaStream_t stream) {
  const int64_t vcols = cols / kVecN;
  int tx = 1;
  while (tx < 32 && tx < vcols) tx *= 2;
  const int ty = kThreads / tx;
  const int64_t grid_x = ceil_div(vcols, tx);
  // Enough row blocks for two waves, within the grid's y limit.
  const int64_t grid_y = std::max<int64_t>(
      1,
      std::min({ceil_div(rows, ty),
                ceil_div(2 * info.resident_blocks(), grid_x), int64_t(65535)}));
  acc_t<T>* partial = nullptr;
  Tensor workspace;
  if (grid_y > 1) {
    const auto acc_dtype = std::is_same_v<T, double>
                               ? torch::headeronly::ScalarType::Double
                               : torch::headeronly::ScalarType::Float;
    workspace = torch::stable::empty({grid_y * cols}, acc_dtype, std::nullopt,
                                     like.device());
    partial = mdata<acc_t<T>>(workspace);
  }
  const dim3 grid{unsigned(grid_x), unsigned(grid_y)};
  grad_per_feature_kernel<T, kVecN, kPerRow>
      <<<grid, dim3(tx, ty), 0, stream>>>(g, x, w, gx, gw, partial, rows, cols);
  CUSTOM_OP_CHECK_LAUNCH("grad_per_feature_kernel");
  if (grid_y > 1) {
    finish_columns_kernel<T><<<unsigned(ceil_div(cols, kFinishColumns)),
                               dim3(kFinishColumns, kFinishParts), 0, stream>>>(
        partial, gw, grid_y, cols);
    CUSTOM_OP_CHECK_LAUNCH("finish_columns_kernel");
  }
}

template <typename T, bool kPerRow>
void launch_grad(const Tensor& g, const Tensor& x, const Tensor& w, Tensor& gx,
                 Tensor& gw, RowView v, WeightForm form, const DeviceInfo& info,
                 cudaStream_t stream) {
  const T* gp = cdata<T>(g);
  const T* xp = cdata<T>(x);
  const T* wp = cdata<T>(w);
  T* gxp = mdata<T>(gx);
  T* gwp = mdata<T>(gw);
  constexpr int kVecN = kVec16<T>;
  const bool aligned = is_aligned16(gp) && is_aligned16(xp) &&
                       is_aligned16(wp) && is_aligned16(gxp) &&
                       is_aligned16(gwp);
  if (form == WeightForm::Full) {
    const int64_t n = x.numel();
    // Vectors must not straddle rows when grad is read per row.
    if (aligned && (!kPerRow || v.cols % kVecN == 0)) {
      launch_full<T, kVecN, kPerRow>(gp, xp, wp, gxp, gwp, n, v.cols, info,
                                     stream);
    } else {
      launch_full<T, 1, kPerRow>(gp, xp, wp, gxp, gwp, n, v.cols, info, stream);
    }
  } else if (aligned && v.cols % kVecN == 0) {
    launch_per_feature<T, kVecN, kPerRow>(x, gp, xp, wp, gxp, gwp, v.rows,
                                          v.cols, info, stream);
  } else {
    launch_per_feature<T, 1, kPerRow>(x, gp, xp, wp, gxp, gwp, v.rows, v.cols,
                                      info, stream);
  }
}

template <typename T>
void launch_grad_typed(const Tensor& g, const Tensor& x, const Tensor& w,
                       Tensor& gx, Tensor& gw, RowView v, WeightForm form,
                       bool grad_per_row, const DeviceInfo& info,
                       cudaStream_t stream) {
  if (grad_per_row) {
    launch_grad<T, true>(g, x, w, gx, gw, v, form, info, stream);
  } else {
    launch_grad<T, false>(g, x, w, gx, gw, v, form, info, stream);
  }
}

}  // namespace

std::tuple<Tensor, Tensor> weighted_grad(const Tensor& grad_in,
                                         const Tensor& x_in, const Tensor& w_in,
                                         WeightForm form, bool grad_per_row) {
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const Tensor g = dense(grad_in);
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  Tensor gx = empty_like_with_shape(x, shape_of(x));
  if (x.numel() == 0) {
    return {gx, torch::stable::new_zeros(w, shape_of(w))};
  }
  Tensor gw = empty_like_with_shape(w, shape_of(w));
  // The elementwise op with w like x is one flat row.
  RowView v = rows_of(x);
  if (!grad_per_row && form == WeightForm::Full) v = {1, x.numel()};
  const int device = x.get_device_index();
  const DeviceInfo& info = device_info(device);
  cudaStream_t stream = current_stream(device);
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), "weighted_grad", [&] {
    launch_grad_typed<scalar_t>(g, x, w, gx, gw, v, form, grad_per_row, info,
                                stream);
  });
  return {gx, gw};
}

}  // namespace custom_op::cuda
