// CUDA kernels of custom_op::weighted_sum_of_squares:
// s[r] = sum_j w[r or -, j] * x[r, j]^2 over the last dimension.
//
// Two shapes of work: short rows (up to kMaxGroupVectors vectors) go to a
// group of 1..32 lanes of a warp, so one warp serves several rows and every
// lane keeps several loads in flight, and so do rows of any length when
// there are enough of them to fill the GPU a warp each; long rows that are
// few get whole blocks, split over several blocks when needed to fill it.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/dispatch.h"
#include "common/library.h"
#include "common/reduce.cuh"
#include "common/tensor_utils.h"
#include "common/vec.cuh"
#include "weighted_sum_of_squares_backward_cuda.h"
#include "weighted_sum_of_squares_weight_form.h"

namespace custom_op::cuda {
namespace {

using weighted_sum_of_squares::check_inputs;
using weighted_sum_of_squares::WeightForm;

constexpr const char* kOp = CUSTOM_OP_QUALIFIED("weighted_sum_of_squares");

// Rows of at most this many vectors are reduced by a group within a warp.
constexpr int64_t kMaxGroupVectors = 256;
// Vectors each lane of a group should load (loads in flight).
constexpr int64_t kVectorsPerLane = 4;

template <typename T, int kVecN>
__device__ __forceinline__ acc_t<T> dot_vec(const Vec<T, kVecN>& xv,
                                            const Vec<T, kVecN>& wv) {
  using A = acc_t<T>;
  A acc = 0;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) {
    const A xf = static_cast<A>(xv.v[k]);
    acc += static_cast<A>(wv.v[k]) * xf * xf;
  }
  return acc;
}

// 1536 threads resident where a multiprocessor holds that many (sm_80 and up).
constexpr int kGroupMinBlocks = min_blocks_per_sm(1536, kThreads);

// w * x * x summed over a row's vectors lane, lane + kGroup, ...; with kHints,
// x is evicted first and w as kEvictW says. With kBatch > 1, kBatch steps'
// vectors are loaded before any is converted, so that many pairs of loads are
// in flight whatever the conversions' schedule; the rest go one step at a time.
template <typename T, int kVecN, int kGroup, bool kHints, int kBatch,
          Evict kEvictW = Evict::kFirst>
__device__ __forceinline__ acc_t<T> group_row_sum(const T* xr, const T* wr,
                                                  int lane, int64_t vcols) {
  auto load_x = [&](int64_t c) {
    if constexpr (kHints) {
      return load_vec_evict<Evict::kFirst, T, kVecN>(xr + c * kVecN);
    } else {
      return load_vec<T, kVecN>(xr + c * kVecN);
    }
  };
  auto load_w = [&](int64_t c) {
    if constexpr (kHints) {
      return load_vec_evict<kEvictW, T, kVecN>(wr + c * kVecN);
    } else {
      return load_vec<T, kVecN>(wr + c * kVecN);
    }
  };
  acc_t<T> acc = 0;
  int64_t c = lane;
  if constexpr (kBatch > 1) {
    for (; c + (kBatch - 1) * kGroup < vcols; c += kBatch * kGroup) {
      Vec<T, kVecN> xv[kBatch], wv[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        xv[u] = load_x(c + u * kGroup);
        wv[u] = load_w(c + u * kGroup);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) acc += dot_vec<T, kVecN>(xv[u], wv[u]);
    }
    // At most kBatch - 1 steps left.
    for (; c < vcols; c += kGroup)
      acc += dot_vec<T, kVecN>(load_x(c), load_w(c));
  } else {
#pragma unroll 4
    for (; c < vcols; c += kGroup)
      acc += dot_vec<T, kVecN>(load_x(c), load_w(c));
  }
  return acc;
}

// Eviction hints for 2-byte types in 16-byte vectors (they lose for fp32).
// fp16 also batches its loads four steps at a time: unbatched, its loads issue
// two at a time between the HADD2 conversions (batching loses for the rest).
template <typename T, int kVecN>
constexpr bool kGroupLoadHints = sizeof(T) == 2 && sizeof(T) * kVecN == 16;
template <typename T>
constexpr int kGroupLoadBatch =
    std::is_same_v<T, torch::headeronly::Half> ? 4 : 1;

// kGroup lanes per row; w_row_stride is cols (w like x) or 0 (1-D w). Bounded
// to 40 registers (6 blocks per multiprocessor): more loads in flight per
// thread beat filling every thread slot at 32 registers.
template <typename T, int kVecN, int kGroup>
__global__ void __launch_bounds__(kThreads, kGroupMinBlocks)
    rows_by_group_kernel(const T* __restrict__ x, const T* __restrict__ w,
                         T* __restrict__ out, int64_t rows, int64_t cols,
                         int64_t w_row_stride) {
  using A = acc_t<T>;
  constexpr int kRowsPerBlock = kThreads / kGroup;
  const int lane = threadIdx.x % kGroup;
  const int64_t vcols = cols / kVecN;
  // Block-uniform loop bounds keep every lane of a warp in the shuffles.
  for (int64_t r0 = int64_t(blockIdx.x) * kRowsPerBlock; r0 < rows;
       r0 += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t r = r0 + threadIdx.x / kGroup;
    A acc = 0;
    if (r < rows) {
      const T* xr = x + r * cols;
      const T* wr = w + r * w_row_stride;
      constexpr int kBatch = kGroupLoadBatch<T>;
      if constexpr (kGroupLoadHints<T, kVecN>) {
        // A 1-D w is reread by every row: evicted last.
        acc = w_row_stride == 0
                  ? group_row_sum<T, kVecN, kGroup, true, kBatch, Evict::kLast>(
                        xr, wr, lane, vcols)
                  : group_row_sum<T, kVecN, kGroup, true, kBatch>(xr, wr, lane,
                                                                  vcols);
      } else {
        acc =
            group_row_sum<T, kVecN, kGroup, false, kBatch>(xr, wr, lane, vcols);
      }
    }
    acc = group_sum(acc, kGroup);
    if (r < rows && lane == 0) out[r] = static_cast<T>(acc);
  }
}

// One block per (row, split); kSplit (splits > 1) writes partial sums for
// finish_split_rows_kernel. Unsplit rows skip the split's division, modulo
// and bound per row.
template <typename T, int kVecN, bool kSplit>
__global__ void __launch_bounds__(kThreads)
    rows_by_block_kernel(const T* __restrict__ x, const T* __restrict__ w,
                         T* __restrict__ out, acc_t<T>* __restrict__ partial,
                         int64_t rows, int64_t cols, int64_t w_row_stride,
                         int64_t splits) {
  using A = acc_t<T>;
  const int64_t vcols = cols / kVecN;
  const int64_t chunk = kSplit ? ceil_div(vcols, splits) : vcols;
  for (int64_t item = blockIdx.x; item < rows * splits; item += gridDim.x) {
    const int64_t r = kSplit ? item / splits : item;
    const int64_t c0 = kSplit ? (item % splits) * chunk : 0;
    const int64_t c1 = kSplit && c0 + chunk < vcols ? c0 + chunk : vcols;
    const T* xr = x + r * cols;
    const T* wr = w + r * w_row_stride;
    A acc = 0;
#pragma unroll 4
    for (int64_t c = c0 + threadIdx.x; c < c1; c += kThreads) {
      acc += dot_vec<T, kVecN>(load_vec<T, kVecN>(xr + c * kVecN),
                               load_vec<T, kVecN>(wr + c * kVecN));
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) {
      if constexpr (kSplit) {
        partial[item] = acc;
      } else {
        out[r] = static_cast<T>(acc);
      }
    }
  }
}

// out[r] = sum of row r's partial sums: a warp per row, so a row split over
// hundreds of blocks is summed 32 partials at a time.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    finish_split_rows_kernel(const acc_t<T>* __restrict__ partial,
                             T* __restrict__ out, int64_t rows,
                             int64_t splits) {
  const int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;  // whole warps: rows are warp-uniform
  acc_t<T> s = 0;
  for (int64_t k = lane; k < splits; k += 32) s += partial[r * splits + k];
  s = group_sum(s, 32);
  if (lane == 0) out[r] = static_cast<T>(s);
}

template <typename T, int kVecN, int kGroup>
void launch_group(const T* x, const T* w, T* out, int64_t rows, int64_t cols,
                  int64_t w_row_stride, const DeviceInfo& info,
                  cudaStream_t stream) {
  const unsigned grid = grid_for(ceil_div(rows, kThreads / kGroup), info);
  rows_by_group_kernel<T, kVecN, kGroup>
      <<<grid, kThreads, 0, stream>>>(x, w, out, rows, cols, w_row_stride);
  CUSTOM_OP_CHECK_LAUNCH("rows_by_group_kernel");
}

// Rows of a length compiled in, the way Inductor compiles each shape: a
// block per row, each thread one vector of x and of w per step, every step
// unrolled (constant offsets, no bounds checks), one accumulator per vector
// element, x evicted first and w last. Only the lengths that measured faster
// than the general kernels are listed (CompiledRowLengths); a length is
// compiled in whole, since unrolling chunks under a loop measured slower.
constexpr int kCompiledRowThreads = 512;
// Threads per row: up to 512, each at least 2 steps.
template <int kVecN, int kCols>
constexpr int kCompiledRowBlock =
    std::min(kCompiledRowThreads, kCols / (2 * kVecN));

// Blocks resident per multiprocessor: 1536 threads' worth for 2-byte types
// (40 registers at 512 threads, no spill; unbounded, fp16 took 42: 2 blocks),
// all 2048 otherwise (32 registers, what fp32 takes unbounded), where the
// multiprocessor holds that many.
template <typename T, int kBlock>
constexpr int kCompiledRowMinBlocks =
    min_blocks_per_sm(sizeof(T) == 2 ? 1536 : 2048, kBlock);

template <typename T, int kVecN, int kCols,
          int kBlock = kCompiledRowBlock<kVecN, kCols>>
__global__ void __launch_bounds__(kBlock, kCompiledRowMinBlocks<T, kBlock>)
    rows_of_compiled_length_kernel(const T* __restrict__ x,
                                   const T* __restrict__ w,
                                   T* __restrict__ out) {
  using A = acc_t<T>;
  constexpr int kStride = kBlock * kVecN;
  static_assert(kCols % kStride == 0, "rows of whole steps only");
  const T* xr = x + int64_t(blockIdx.x) * kCols + threadIdx.x * kVecN;
  const T* wr = w + threadIdx.x * kVecN;
  A acc[kVecN] = {};
#pragma unroll
  for (int c = 0; c < kCols; c += kStride) {
    const auto wv = load_vec_evict<Evict::kLast, T, kVecN>(wr + c);
    const auto xv = load_vec_evict<Evict::kFirst, T, kVecN>(xr + c);
#pragma unroll
    for (int k = 0; k < kVecN; ++k) {
      const A xf = static_cast<A>(xv.v[k]);
      acc[k] += static_cast<A>(wv.v[k]) * xf * xf;
    }
  }
  A total = 0;
#pragma unroll
  for (int k = 0; k < kVecN; ++k) total += acc[k];
  total = block_sum(total);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<T>(total);
}

// The row lengths compiled in, per type (none for the others). Another length
// costs one instantiation; measure it against the general kernel before adding
// it (python -m bench --op weighted_sum_of_squares, both builds).
template <int... kLengths>
struct RowLengths {};
template <typename T>
struct CompiledRowLengths {
  using type = RowLengths<>;
};
template <>
struct CompiledRowLengths<float> {
  using type = RowLengths<1024, 2048, 4096, 8192, 16384, 65536>;
};
template <>
struct CompiledRowLengths<torch::headeronly::Half> {
  // 1024 to 16384 lost to the general kernels.
  using type = RowLengths<65536>;
};

// Launches the compiled kernel if cols is one of kLengths; false otherwise.
template <typename T, int kVecN, int... kLengths>
bool launch_compiled_length(RowLengths<kLengths...>, const T* x, const T* w,
                            T* out, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  auto launch = [&](auto length) {
    constexpr int kCols = decltype(length)::value;
    if (cols != kCols) return false;
    rows_of_compiled_length_kernel<T, kVecN, kCols>
        <<<unsigned(rows), kCompiledRowBlock<kVecN, kCols>, 0, stream>>>(x, w,
                                                                         out);
    CUSTOM_OP_CHECK_LAUNCH("rows_of_compiled_length_kernel");
    return true;
  };
  return (false || ... || launch(std::integral_constant<int, kLengths>{}));
}

template <typename T, int kVecN>
void launch_rows(const Tensor& like, const T* x, const T* w, T* out,
                 int64_t rows, int64_t cols, int64_t w_row_stride,
                 const DeviceInfo& info, cudaStream_t stream) {
  const int64_t vcols = cols / kVecN;
  const int64_t two_waves = 2 * info.resident_blocks();
  // Rows of a compiled-in length with a 1-D w, one block per row (a grid of
  // up to 2^31 - 1 blocks), enough rows for two waves of blocks; 16-byte
  // vectors only (aligned rows).
  if constexpr (sizeof(T) * kVecN == 16) {
    if (w_row_stride == 0 && rows >= two_waves && rows <= INT32_MAX &&
        launch_compiled_length<T, kVecN>(typename CompiledRowLengths<T>::type{},
                                         x, w, out, rows, cols, stream)) {
      return;
    }
  }
  // Longer rows still get one warp each when the rows alone fill half the
  // device's warp slots: no block-wide barrier per row, and each lane keeps
  // loads in flight along the whole row.
  const int64_t resident_warps = info.resident_blocks() * (kThreads / 32);
  if (vcols <= kMaxGroupVectors || 2 * rows >= resident_warps) {
    // Smallest power-of-two group giving each lane ~kVectorsPerLane vectors.
    int group = 1;
    while (group < 32 && group * kVectorsPerLane < vcols) group *= 2;
    // The group size is a template argument: pick the instantiation.
    auto launch = [&](auto lanes) {
      launch_group<T, kVecN, decltype(lanes)::value>(
          x, w, out, rows, cols, w_row_stride, info, stream);
    };
    switch (group) {
      case 1:
        return launch(std::integral_constant<int, 1>{});
      case 2:
        return launch(std::integral_constant<int, 2>{});
      case 4:
        return launch(std::integral_constant<int, 4>{});
      case 8:
        return launch(std::integral_constant<int, 8>{});
      case 16:
        return launch(std::integral_constant<int, 16>{});
      default:
        return launch(std::integral_constant<int, 32>{});
    }
  }
  // Long rows: split them when there are too few to fill two waves.
  int64_t splits = 1;
  if (rows < two_waves) {
    splits =
        std::min(ceil_div(two_waves, rows),
                 std::max<int64_t>(1, vcols / (kThreads * kVectorsPerLane)));
  }
  acc_t<T>* partial = nullptr;
  Tensor workspace;
  if (splits > 1) {
    const auto acc_dtype = std::is_same_v<T, double>
                               ? torch::headeronly::ScalarType::Double
                               : torch::headeronly::ScalarType::Float;
    workspace = torch::stable::empty({rows * splits}, acc_dtype, std::nullopt,
                                     like.device());
    partial = mdata<acc_t<T>>(workspace);
  }
  const unsigned grid = grid_for(rows * splits, info);
  const auto kernel = splits > 1 ? rows_by_block_kernel<T, kVecN, true>
                                 : rows_by_block_kernel<T, kVecN, false>;
  kernel<<<grid, kThreads, 0, stream>>>(x, w, out, partial, rows, cols,
                                        w_row_stride, splits);
  CUSTOM_OP_CHECK_LAUNCH("rows_by_block_kernel");
  if (splits > 1) {
    finish_split_rows_kernel<T>
        <<<unsigned(ceil_div(rows * 32, kThreads)), kThreads, 0, stream>>>(
            partial, out, rows, splits);
    CUSTOM_OP_CHECK_LAUNCH("finish_split_rows_kernel");
  }
}

template <typename T>
void launch_weighted_sum_of_squares(const Tensor& x, const Tensor& w,
                                    Tensor& out, RowView v, WeightForm form,
                                    const DeviceInfo& info,
                                    cudaStream_t stream) {
  const T* xp = cdata<T>(x);
  const T* wp = cdata<T>(w);
  T* op = mdata<T>(out);
  const int64_t w_row_stride = form == WeightForm::Full ? v.cols : 0;
  constexpr int kVecN = kVec16<T>;
  if (v.cols % kVecN == 0 && is_aligned16(xp) && is_aligned16(wp)) {
    launch_rows<T, kVecN>(x, xp, wp, op, v.rows, v.cols, w_row_stride, info,
                          stream);
  } else {
    launch_rows<T, 1>(x, xp, wp, op, v.rows, v.cols, w_row_stride, info,
                      stream);
  }
}

Tensor weighted_sum_of_squares_cuda(const Tensor& x_in, const Tensor& w_in) {
  const WeightForm form = check_inputs(kOp, x_in, w_in);
  torch::stable::accelerator::DeviceGuard guard(x_in.get_device_index());
  const Tensor x = dense(x_in);
  const Tensor w = dense(w_in);
  const auto out_shape = shape_without_last_dim(x);
  const RowView v = rows_of(x);
  if (v.cols == 0) return torch::stable::new_zeros(x, out_shape);
  Tensor out = empty_like_with_shape(x, out_shape);
  if (v.rows == 0) return out;
  const int device = x.get_device_index();
  const DeviceInfo& info = device_info(device);
  cudaStream_t stream = current_stream(device);
  CUSTOM_OP_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
    launch_weighted_sum_of_squares<scalar_t>(x, w, out, v, form, info, stream);
  });
  return out;
}

std::tuple<Tensor, Tensor> weighted_sum_of_squares_backward_cuda(
    const Tensor& grad, const Tensor& x, const Tensor& w, bool deterministic) {
  const WeightForm form = check_inputs(kOp, x, w);
  check_like(kOp, "grad", grad, x, shape_without_last_dim(x));
  return weighted_sum_of_squares_grad(grad, x, w, form, deterministic);
}

}  // namespace

CUSTOM_OP_IMPL(CUDA, m) {
  m.impl("weighted_sum_of_squares", TORCH_BOX(&weighted_sum_of_squares_cuda));
  m.impl("weighted_sum_of_squares_backward",
         TORCH_BOX(&weighted_sum_of_squares_backward_cuda));
}

}  // namespace custom_op::cuda
