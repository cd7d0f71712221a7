// Work-split experiments for the reduction s[r] = sum_j w[j] x[r,j]^2 on one
// GPU, outside PyTorch, each variant timed back-to-back (an event pair per
// launch, medians) against the device-to-device copy bandwidth of the same
// run, and checked against the first variant's output:
//  - few long rows (4096x65536): a block per row with 256 (the library), 512
//    or 1024 threads, a warp per row, and an even split of the whole tensor
//    over one wave of blocks (no partly filled last wave; rows cut at block
//    edges are finished by a second kernel, in a fixed order);
//  - many short rows (1048576x128): lanes per row, a grid of one wave against
//    one block per 2^k rows, and two rows per group in flight;
//
//   nvcc -O3 -arch=sm_90 -o /tmp/rv tools/h200/reduction_variants.cu && /tmp/rv
//   [--fixed-long-rows | --bulk]
//
// --bulk: x streamed through shared-memory stages by Hopper's bulk
// asynchronous copy (bulk_async.cuh), one or two resident waves of blocks,
// against the library's kernels: long rows in segments (a block's rows
// strided over the grid), short rows whole (a group of lanes per row).
#include <cmath>
#include <string>
#include <type_traits>

#include "bulk_async.cuh"
#include "standalone.cuh"

template <typename T>
constexpr int kV = 16 / sizeof(T);

// 16-byte loads of x with the cache hint kHint: 0 none, 1 L1::evict_first (what
// Triton emits for Inductor's eviction_policy='evict_first'), 2 an L2
// evict_first policy, 3 .cs (streaming, __ldcs), 4 a 256-byte L2 prefetch, 5
// L1::no_allocate, 6 L1::evict_last (Inductor's hint for w). By value: a
// reference into global memory let the compiler load a bf16 vector as eight
// 2-byte loads.
template <typename T, int kHint = 0>
__device__ __forceinline__ Vec<T, kV<T>> load(const Vec<T, kV<T>>* p) {
  if constexpr (kHint == 0) {
    return *p;
  } else {
    uint4 v;
    if constexpr (kHint == 1) {
      asm("ld.global.L1::evict_first.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else if constexpr (kHint == 2) {
      unsigned long long policy;
      asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
          : "=l"(policy));
      asm("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p), "l"(policy));
    } else if constexpr (kHint == 3) {
      asm("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else if constexpr (kHint == 4) {
      asm("ld.global.nc.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else if constexpr (kHint == 6) {
      asm("ld.global.L1::evict_last.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else {
      asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    }
    Vec<T, kV<T>> out;
    static_assert(sizeof(out) == sizeof(v));
    __builtin_memcpy(&out, &v, sizeof(v));
    return out;
  }
}

template <typename T>
__device__ __forceinline__ float dot(const Vec<T, kV<T>> xv,
                                     const Vec<T, kV<T>> wv) {
  float acc = 0;
#pragma unroll
  for (int k = 0; k < kV<T>; ++k) {
    const float xf = to_f(xv.v[k]);
    acc += to_f(wv.v[k]) * xf * xf;
  }
  return acc;
}

template <int kBlock>
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[kBlock / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0;
  if (threadIdx.x < 32) {
    total = threadIdx.x < kBlock / 32 ? warp_sums[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o /= 2)
      total += __shfl_xor_sync(0xffffffffu, total, o);
  }
  __syncthreads();
  return total;
}

// A block of kBlock threads per kRows rows (grid-stride over rows), x and w
// loaded with the cache hints kHint and kWHint; each w vector serves kRows
// rows.
template <typename T, int kBlock, int kHint = 0, int kWHint = 0, int kRows = 1>
__global__ void __launch_bounds__(kBlock)
    rows_block(const T* __restrict__ x, const T* __restrict__ w,
               T* __restrict__ out, long rows, long cols) {
  using Vt = Vec<T, kV<T>>;
  const long vcols = cols / kV<T>;
  for (long r = blockIdx.x * kRows; r < rows; r += gridDim.x * kRows) {
    const Vt* xr = reinterpret_cast<const Vt*>(x + r * cols);
    const Vt* wr = reinterpret_cast<const Vt*>(w);
    float acc[kRows] = {};
#pragma unroll 4
    for (long c = threadIdx.x; c < vcols; c += kBlock) {
      const Vt wv = load<T, kWHint>(wr + c);
#pragma unroll
      for (int u = 0; u < kRows; ++u)
        if (r + u < rows) acc[u] += dot(load<T, kHint>(xr + u * vcols + c), wv);
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      const float s = block_sum<kBlock>(acc[u]);
      if (threadIdx.x == 0 && r + u < rows) out[r + u] = from_f<T>(s);
    }
  }
}

// A block of kBlock threads per row, as rows_block, with the row length a
// compile-time constant (kCols), as Inductor compiles its kernel for the
// shape: constant trip count, 32-bit offsets, no bounds checks. Each thread
// loads kUnroll vectors of x and w before using any; kVecAcc keeps one
// accumulator per vector element (Triton's [1, R0_BLOCK] accumulator, summed
// at the end) instead of one per thread.
template <typename T, int kBlock, int kCols, int kUnroll, bool kVecAcc>
__global__ void __launch_bounds__(kBlock)
    rows_block_fixed(const T* __restrict__ x, const T* __restrict__ w,
                     T* __restrict__ out, int rows) {
  using Vt = Vec<T, kV<T>>;
  constexpr int kVcols = kCols / kV<T>;
  static_assert(kVcols % (kBlock * kUnroll) == 0, "whole steps only");
  const Vt* wr = reinterpret_cast<const Vt*>(w);
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const Vt* xr = reinterpret_cast<const Vt*>(x) + unsigned(r) * kVcols;
    float acc[kVecAcc ? kV<T> : 1] = {};
    for (int c0 = threadIdx.x; c0 < kVcols; c0 += kBlock * kUnroll) {
      Vt xv[kUnroll], wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        xv[u] = load<T>(xr + c0 + u * kBlock);
        wv[u] = load<T>(wr + c0 + u * kBlock);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if constexpr (kVecAcc) {
#pragma unroll
          for (int k = 0; k < kV<T>; ++k) {
            const float xf = to_f(xv[u].v[k]);
            acc[k] += to_f(wv[u].v[k]) * xf * xf;
          }
        } else {
          acc[0] += dot(xv[u], wv[u]);
        }
      }
    }
    float a = 0;
#pragma unroll
    for (int k = 0; k < (kVecAcc ? kV<T> : 1); ++k) a += acc[k];
    const float s = block_sum<kBlock>(a);
    if (threadIdx.x == 0) out[r] = from_f<T>(s);
  }
}

// rows_block_fixed with the next step's kUnroll vectors of x and w loaded
// before the current step's are used (software pipelining in registers, as
// Triton schedules its loop over a row: 4 vector pairs in flight per thread
// from the start in its SASS for this shape, R0_BLOCK 2048 and 8 warps).
template <typename T, int kBlock, int kCols, int kUnroll>
__global__ void __launch_bounds__(kBlock)
    rows_block_pipelined(const T* __restrict__ x, const T* __restrict__ w,
                         T* __restrict__ out, int rows) {
  using Vt = Vec<T, kV<T>>;
  constexpr int kVcols = kCols / kV<T>;
  constexpr int kStep = kBlock * kUnroll;
  static_assert(kVcols % kStep == 0, "whole steps only");
  const Vt* wr = reinterpret_cast<const Vt*>(w);
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const Vt* xr = reinterpret_cast<const Vt*>(x) + unsigned(r) * kVcols;
    float acc[kV<T>] = {};
    Vt xv[kUnroll], wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      xv[u] = load<T>(xr + threadIdx.x + u * kBlock);
      wv[u] = load<T>(wr + threadIdx.x + u * kBlock);
    }
    for (int c0 = threadIdx.x; c0 < kVcols; c0 += kStep) {
      Vt xn[kUnroll], wn[kUnroll];
      if (c0 + kStep < kVcols) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          xn[u] = load<T>(xr + c0 + kStep + u * kBlock);
          wn[u] = load<T>(wr + c0 + kStep + u * kBlock);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int k = 0; k < kV<T>; ++k) {
          const float xf = to_f(xv[u].v[k]);
          acc[k] += to_f(wv[u].v[k]) * xf * xf;
        }
        xv[u] = xn[u];
        wv[u] = wn[u];
      }
    }
    float a = 0;
#pragma unroll
    for (int k = 0; k < kV<T>; ++k) a += acc[k];
    const float s = block_sum<kBlock>(a);
    if (threadIdx.x == 0) out[r] = from_f<T>(s);
  }
}

// kGroup lanes per row, kRows rows per group in flight; 32 registers at most
// (the library's bound) with kMinBlocks = 8 resident blocks of 256 threads.
template <typename T, int kGroup, int kRows, int kUnroll, int kHint = 0,
          int kMinBlocks = 8>
__global__ void __launch_bounds__(256, kMinBlocks)
    rows_group(const T* __restrict__ x, const T* __restrict__ w,
               T* __restrict__ out, long rows, long cols) {
  using Vt = Vec<T, kV<T>>;
  constexpr int kGroupsPerBlock = 256 / kGroup;
  constexpr int kRowsPerBlock = kGroupsPerBlock * kRows;
  const int lane = threadIdx.x % kGroup;
  const long vcols = cols / kV<T>;
  const Vt* wr = reinterpret_cast<const Vt*>(w);
  for (long r0 = (long)blockIdx.x * kRowsPerBlock; r0 < rows;
       r0 += (long)gridDim.x * kRowsPerBlock) {
    float acc[kRows];
    long r[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      acc[u] = 0;
      r[u] = r0 + u * kGroupsPerBlock + threadIdx.x / kGroup;
    }
#pragma unroll kUnroll
    for (long c = lane; c < vcols; c += kGroup) {
      const Vt wv = load<T>(wr + c);
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        if (r[u] < rows)
          acc[u] += dot(
              load<T, kHint>(reinterpret_cast<const Vt*>(x + r[u] * cols) + c),
              wv);
      }
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      for (int o = kGroup / 2; o > 0; o /= 2)
        acc[u] += __shfl_xor_sync(0xffffffffu, acc[u], o, kGroup);
      if (r[u] < rows && lane == 0) out[r[u]] = from_f<T>(acc[u]);
    }
  }
}

// Block b reduces the flattened vectors [b * per, (b + 1) * per): whole rows
// go to out, the first and last cut rows to partial[2b] and partial[2b + 1].
template <typename T>
__global__ void __launch_bounds__(256)
    even_split(const T* __restrict__ x, const T* __restrict__ w,
               T* __restrict__ out, float* __restrict__ partial, long rows,
               long cols, long per) {
  using Vt = Vec<T, kV<T>>;
  const long vcols = cols / kV<T>;
  const long begin = blockIdx.x * per;
  const long end = min(begin + per, rows * vcols);
  const Vt* xv = reinterpret_cast<const Vt*>(x);
  const Vt* wv = reinterpret_cast<const Vt*>(w);
  long r = begin / vcols;
  for (long s = begin; s < end; ++r) {
    const long row_start = r * vcols;
    const long e = min(end, row_start + vcols);
    float acc = 0;
#pragma unroll 4
    for (long i = s + threadIdx.x; i < e; i += 256)
      acc += dot(load<T>(xv + i), load<T>(wv + i - row_start));
    acc = block_sum<256>(acc);
    if (threadIdx.x == 0) {
      if (s == row_start && e == row_start + vcols) {
        out[r] = from_f<T>(acc);
      } else {
        partial[2 * blockIdx.x + (s == begin ? 0 : 1)] = acc;
      }
    }
    s = e;
  }
}

template <typename T>
__global__ void finish_even_split(const float* __restrict__ partial,
                                  T* __restrict__ out, long rows, long vcols,
                                  long per) {
  const long r = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const long b0 = r * vcols / per, b1 = ((r + 1) * vcols - 1) / per;
  if (b0 == b1) return;  // written whole by its block
  float s = 0;
  for (long b = b0; b <= b1; ++b)
    s += partial[2 * b + (b * per < r * vcols ? 1 : 0)];
  out[r] = from_f<T>(s);
}

// Long rows through kStages bulk-copy stages: block b takes rows b, b + grid,
// ...; each row in segments of stage_bytes (cols * sizeof(T) a multiple of
// it), the row's sum reduced over the block after its last segment.
template <typename T, int kStages>
__global__ void __launch_bounds__(256)
    rows_bulk(const T* __restrict__ x, const T* __restrict__ w,
              T* __restrict__ out, long rows, long cols, int stage_bytes) {
  using Vt = Vec<T, kV<T>>;
  extern __shared__ __align__(128) char stages[];
  const long seg = stage_bytes / long(sizeof(T)), segs = cols / seg;
  const long mine =
      blockIdx.x < rows ? (rows - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const long chunks = mine * segs;
  long k = 0;
  float acc = 0;
  auto row_of = [&](long c) { return blockIdx.x + (c / segs) * long(gridDim.x); };
  auto next = [&]() -> long { return k < chunks ? k++ : -1; };
  auto issue = [&](long c, char* st, uint64_t* bar) {
    mbar_arrive_expect(bar, unsigned(stage_bytes));
    bulk_load(st, x + row_of(c) * cols + (c % segs) * seg, unsigned(stage_bytes),
              bar);
  };
  auto consume = [&](long c, char* st) {
    const Vt* sv = reinterpret_cast<const Vt*>(st);
    const Vt* wv = reinterpret_cast<const Vt*>(w + (c % segs) * seg);
    const int nv = int(seg / kV<T>);
#pragma unroll 4
    for (int v = threadIdx.x; v < nv; v += 256) acc += dot(sv[v], load<T>(wv + v));
    if (c % segs == segs - 1) {
      const float s = block_sum<256>(acc);
      if (threadIdx.x == 0) out[row_of(c)] = from_f<T>(s);
      acc = 0;
    }
  };
  bulk_pipeline<kStages>(stages, stage_bytes, next, issue, consume);
}

// Short rows (cols / kV <= 32 vectors) through kStages bulk-copy stages of
// stage_rows whole rows: chunk c is rows [c * stage_rows, ...), static
// (blockIdx.x + k * gridDim.x); a group of vcols lanes per row, each lane
// one vector, summed by shuffles.
template <typename T, int kStages>
__global__ void __launch_bounds__(256)
    short_rows_bulk(const T* __restrict__ x, const T* __restrict__ w,
                    T* __restrict__ out, long rows, long cols, int stage_rows) {
  using Vt = Vec<T, kV<T>>;
  extern __shared__ __align__(128) char stages[];
  const int vcols = int(cols / kV<T>);
  const int lane = threadIdx.x % vcols, group = threadIdx.x / vcols;
  const int groups = 256 / vcols;
  const Vt wv = load<T>(reinterpret_cast<const Vt*>(w) + lane);
  const long chunks = (rows + stage_rows - 1) / stage_rows;
  const unsigned row_bytes = unsigned(cols * sizeof(T));
  long k = 0;
  auto next = [&]() -> long {
    const long c = blockIdx.x + (k++) * long(gridDim.x);
    return c < chunks ? c : -1;
  };
  auto issue = [&](long c, char* st, uint64_t* bar) {
    const long nr = min(long(stage_rows), rows - c * stage_rows);
    mbar_arrive_expect(bar, unsigned(nr) * row_bytes);
    bulk_load(st, x + c * stage_rows * cols, unsigned(nr) * row_bytes, bar);
  };
  auto consume = [&](long c, char* st) {
    const long r0 = c * stage_rows;
    const int nr = int(min(long(stage_rows), rows - r0));
    const Vt* sv = reinterpret_cast<const Vt*>(st);
#pragma unroll 4
    for (int lr = group; lr < nr; lr += groups) {
      float s = dot(sv[lr * vcols + lane], wv);
      for (int o = vcols / 2; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, o, vcols);
      if (lane == 0) out[r0 + lr] = from_f<T>(s);
    }
  };
  bulk_pipeline<kStages>(stages, stage_rows * int(row_bytes), next, issue,
                         consume);
}

template <typename T>
struct Problem {
  const char* name;
  long rows, cols;
  double copy;
  int sms;
  T *x, *w, *out;
  float* partial;
  std::vector<float> ref;
  double bytes() const { return double(rows * cols + cols + rows) * sizeof(T); }
  template <typename F>
  void run(const char* variant, long grid, F launch, int warmup = 10) {
    CHECK(cudaMemset(out, 0, rows * sizeof(T)));
    launch();
    CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = to_host(out, rows);
    if (ref.empty()) ref = got;
    double worst = 0;
    for (long i = 0; i < rows; ++i)
      worst = std::max(worst, double(std::fabs(got[i] - ref[i])) /
                                  (std::fabs(ref[i]) + 1.0));
    const float ms = back_to_back_ms(launch, warmup);
    std::printf("%-5s %7ldx%-6ld %-42s grid %7ld  %.4f ms %6.1f%%  diff %.1e\n",
                name, rows, cols, variant, grid, ms,
                100 * bytes() / ms / 1e6 / copy, worst);
  }
};

template <typename T>
Problem<T> make(const char* name, long rows, long cols, int sms, double copy) {
  Problem<T> p{name, rows, cols, copy, sms};
  const long n = rows * cols;
  CHECK(cudaMalloc(&p.x, n * sizeof(T)));
  CHECK(cudaMalloc(&p.w, cols * sizeof(T)));
  CHECK(cudaMalloc(&p.out, rows * sizeof(T)));
  CHECK(cudaMalloc(&p.partial, 2L * sms * 16 * sizeof(float)));
  fill<<<(n + 255) / 256, 256>>>(p.x, n, 3);
  fill<<<(cols + 255) / 256, 256>>>(p.w, cols, 4);
  return p;
}

template <typename T>
void release(Problem<T>& p) {
  CHECK(cudaFree(p.x));
  CHECK(cudaFree(p.w));
  CHECK(cudaFree(p.out));
  CHECK(cudaFree(p.partial));
}

template <typename T>
void long_rows(const char* name, int sms, double copy) {
  auto p = make<T>(name, 4096, 65536, sms, copy);
  const long rows = p.rows, cols = p.cols, vcols = cols / kV<T>;
  p.run("block of 256 per row (library)", rows, [&] {
    rows_block<T, 256><<<rows, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  const char* hints[] = {
      "",      "x L1::evict_first",   "x L2 evict_first policy",
      "x .cs", "x L2::256B prefetch", "x L1::no_allocate"};
  char label[96];
  auto hinted = [&](auto hint) {
    std::snprintf(label, sizeof label, "block of 256 per row, %s",
                  hints[decltype(hint)::value]);
    p.run(label, rows, [&] {
      rows_block<T, 256, decltype(hint)::value>
          <<<rows, 256>>>(p.x, p.w, p.out, rows, cols);
    });
  };
  hinted(std::integral_constant<int, 1>{});
  hinted(std::integral_constant<int, 2>{});
  hinted(std::integral_constant<int, 3>{});
  hinted(std::integral_constant<int, 4>{});
  hinted(std::integral_constant<int, 5>{});
  p.run("block of 256 per row, x evict_first, w evict_last", rows, [&] {
    rows_block<T, 256, 1, 6><<<rows, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("block of 512 per row, x evict_first, w evict_last", rows, [&] {
    rows_block<T, 512, 1, 6><<<rows, 512>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("block of 256 per row, w evict_last", rows, [&] {
    rows_block<T, 256, 0, 6><<<rows, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("block of 256 per 2 rows", rows / 2, [&] {
    rows_block<T, 256, 0, 0, 2><<<rows / 2, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("block of 512 per 2 rows", rows / 2, [&] {
    rows_block<T, 512, 0, 0, 2><<<rows / 2, 512>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("block of 512 per row, x L1::evict_first", rows, [&] {
    rows_block<T, 512, 1><<<rows, 512>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("block of 512 per row", rows, [&] {
    rows_block<T, 512><<<rows, 512>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("block of 1024 per row", rows, [&] {
    rows_block<T, 1024><<<rows, 1024>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("warp per row, unroll 4", rows / 8, [&] {
    rows_group<T, 32, 1, 4><<<rows / 8, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  p.run("warp per row, unroll 8", rows / 8, [&] {
    rows_group<T, 32, 1, 8><<<rows / 8, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  for (long blocks : {(long)sms * 8, (long)sms * 16, (long)sms * 4}) {
    const long per = (rows * vcols + blocks - 1) / blocks;
    std::snprintf(label, sizeof label, "even split over %ld blocks", blocks);
    p.run(label, blocks, [&] {
      even_split<T>
          <<<blocks, 256>>>(p.x, p.w, p.out, p.partial, rows, cols, per);
      finish_even_split<T>
          <<<(rows + 255) / 256, 256>>>(p.partial, p.out, rows, vcols, per);
    });
  }
  release(p);
}

template <typename T, int kGroup>
void short_rows(const char* name, int sms, double copy) {
  auto p = make<T>(name, 1048576, 128, sms, copy);
  const long rows = p.rows, cols = p.cols;
  const long one_wave = (long)sms * 8;
  auto blocks_for = [&](int group, int rows_per_group) {
    return std::min(one_wave * 32, rows / (256 / group * rows_per_group));
  };
  char label[96];
  const long g1 = blocks_for(kGroup, 1);
  std::snprintf(label, sizeof label, "%d lanes per row (library)", kGroup);
  p.run(label, g1, [&] {
    rows_group<T, kGroup, 1, 4><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, grid of one wave", kGroup);
  p.run(label, one_wave, [&] {
    rows_group<T, kGroup, 1, 4><<<one_wave, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, grid of four waves", kGroup);
  p.run(label, 4 * one_wave, [&] {
    rows_group<T, kGroup, 1, 4>
        <<<4 * one_wave, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, x L1::evict_first", kGroup);
  p.run(label, g1, [&] {
    rows_group<T, kGroup, 1, 4, 1><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, x L2::256B prefetch", kGroup);
  p.run(label, g1, [&] {
    rows_group<T, kGroup, 1, 4, 4><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, x .cs", kGroup);
  p.run(label, g1, [&] {
    rows_group<T, kGroup, 1, 4, 3><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  const long g2 = blocks_for(kGroup, 2);
  std::snprintf(label, sizeof label, "%d lanes, 2 rows per group", kGroup);
  p.run(label, g2, [&] {
    rows_group<T, kGroup, 2, 4><<<g2, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, 2 rows per group, one wave",
                kGroup);
  p.run(label, one_wave, [&] {
    rows_group<T, kGroup, 2, 4><<<one_wave, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, 40 registers", kGroup);
  p.run(label, g1, [&] {
    rows_group<T, kGroup, 1, 4, 0, 6><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, 64 registers", kGroup);
  p.run(label, g1, [&] {
    rows_group<T, kGroup, 1, 4, 0, 4><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, 2 rows per group, 64 registers",
                kGroup);
  p.run(label, g2, [&] {
    rows_group<T, kGroup, 2, 4, 0, 4><<<g2, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  const long g2d = blocks_for(kGroup * 2, 2);
  std::snprintf(label, sizeof label, "%d lanes, 2 rows per group", kGroup * 2);
  p.run(label, g2d, [&] {
    rows_group<T, kGroup * 2, 2, 4><<<g2d, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, 2 rows per group, L2::256B",
                kGroup * 2);
  p.run(label, g2d, [&] {
    rows_group<T, kGroup * 2, 2, 4, 4>
        <<<g2d, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, 2 rows per group, L2::256B",
                kGroup);
  p.run(label, g2, [&] {
    rows_group<T, kGroup, 2, 4, 4><<<g2, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  std::snprintf(label, sizeof label, "%d lanes, L2::256B, 40 registers",
                kGroup);
  p.run(label, g1, [&] {
    rows_group<T, kGroup, 1, 4, 4, 6><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  const long gd1 = blocks_for(kGroup * 2, 1);
  std::snprintf(label, sizeof label, "%d lanes, L2::256B", kGroup * 2);
  p.run(label, gd1, [&] {
    rows_group<T, kGroup * 2, 1, 4, 4>
        <<<gd1, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  const long gh = blocks_for(kGroup / 2, 1);
  std::snprintf(label, sizeof label, "%d lanes per row", kGroup / 2);
  p.run(label, gh, [&] {
    rows_group<T, kGroup / 2, 1, 4><<<gh, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  const long gd = blocks_for(kGroup * 2, 1);
  std::snprintf(label, sizeof label, "%d lanes per row", kGroup * 2);
  p.run(label, gd, [&] {
    rows_group<T, kGroup * 2, 1, 4><<<gd, 256>>>(p.x, p.w, p.out, rows, cols);
  });
  release(p);
}

// 4096x65536 only: the library's block per row against kernels compiled for
// the row length (--fixed-long-rows).
template <typename T>
void fixed_long_rows(const char* name, int sms, double copy) {
  auto p = make<T>(name, 4096, 65536, sms, copy);
  const int rows = int(p.rows);
  p.run("block of 256 per row (library)", rows, [&] {
    rows_block<T, 256><<<rows, 256>>>(p.x, p.w, p.out, p.rows, p.cols);
  });
  p.run("fixed 65536, 256 threads, unroll 4", rows, [&] {
    rows_block_fixed<T, 256, 65536, 4, false>
        <<<rows, 256>>>(p.x, p.w, p.out, rows);
  });
  p.run("fixed 65536, 256 threads, unroll 4, vector acc", rows, [&] {
    rows_block_fixed<T, 256, 65536, 4, true>
        <<<rows, 256>>>(p.x, p.w, p.out, rows);
  });
  p.run("fixed 65536, 256 threads, unroll 8, vector acc", rows, [&] {
    rows_block_fixed<T, 256, 65536, 8, true>
        <<<rows, 256>>>(p.x, p.w, p.out, rows);
  });
  p.run("fixed 65536, 512 threads, unroll 4, vector acc", rows, [&] {
    rows_block_fixed<T, 512, 65536, 4, true>
        <<<rows, 512>>>(p.x, p.w, p.out, rows);
  });
  p.run("fixed 65536, 512 threads, unroll 2, vector acc", rows, [&] {
    rows_block_fixed<T, 512, 65536, 2, true>
        <<<rows, 512>>>(p.x, p.w, p.out, rows);
  });
  p.run("fixed 65536, 128 threads, unroll 8, vector acc", rows, [&] {
    rows_block_fixed<T, 128, 65536, 8, true>
        <<<rows, 128>>>(p.x, p.w, p.out, rows);
  });
  p.run("pipelined, 256 threads, 2 vectors per step", rows, [&] {
    rows_block_pipelined<T, 256, 65536, 2>
        <<<rows, 256>>>(p.x, p.w, p.out, rows);
  });
  p.run("pipelined, 256 threads, 4 vectors per step", rows, [&] {
    rows_block_pipelined<T, 256, 65536, 4>
        <<<rows, 256>>>(p.x, p.w, p.out, rows);
  });
  p.run("pipelined, 512 threads, 2 vectors per step", rows, [&] {
    rows_block_pipelined<T, 512, 65536, 2>
        <<<rows, 512>>>(p.x, p.w, p.out, rows);
  });
  release(p);
}

// --bulk: the library's kernels against the bulk-copy pipelines.
template <typename T, int kGroup>
void bulk_rows(const char* name, int sms, double copy) {
  char label[96];
  {
    auto p = make<T>(name, 4096, 65536, sms, copy);
    const long rows = p.rows, cols = p.cols;
    p.run("block of 256 per row (library)", rows, [&] {
      rows_block<T, 256><<<rows, 256>>>(p.x, p.w, p.out, rows, cols);
    });
    auto long_case = [&](auto stages, int stage_bytes, int per_sm, long grid) {
      constexpr int S = decltype(stages)::value;
      auto kernel = rows_bulk<T, S>;
      const int smem = S * stage_bytes;
      const int occ = bulk_occupancy(kernel, smem, per_sm);
      if (grid == 0) grid = long(sms) * occ;
      std::snprintf(label, sizeof label, "bulk %dx%d KB, %d/SM", S,
                    stage_bytes / 1024, occ);
      p.run(label, grid, [&] {
        kernel<<<grid, 256, smem>>>(p.x, p.w, p.out, rows, cols, stage_bytes);
      });
    };
    using S4 = std::integral_constant<int, 4>;
    using S8 = std::integral_constant<int, 8>;
    using S3 = std::integral_constant<int, 3>;
    long_case(S4{}, 16384, 2, 0);
    long_case(S4{}, 16384, 2, 256);  // 16 rows per block, no partial wave
    long_case(S8{}, 8192, 2, 256);
    long_case(S4{}, 32768, 1, 0);
    long_case(S3{}, 16384, 4, 0);
    long_case(S4{}, 16384, 3, 0);
    release(p);
  }
  {
    auto p = make<T>(name, 1048576, 128, sms, copy);
    const long rows = p.rows, cols = p.cols;
    const long g1 = std::min(long(sms) * 8 * 32, rows / (256 / kGroup));
    std::snprintf(label, sizeof label, "%d lanes per row (library)", kGroup);
    p.run(label, g1, [&] {
      rows_group<T, kGroup, 1, 4><<<g1, 256>>>(p.x, p.w, p.out, rows, cols);
    });
    auto short_case = [&](auto stages, int stage_bytes, int per_sm) {
      constexpr int S = decltype(stages)::value;
      auto kernel = short_rows_bulk<T, S>;
      const int stage_rows = stage_bytes / int(cols * sizeof(T));
      const int smem = S * stage_rows * int(cols * sizeof(T));
      const int occ = bulk_occupancy(kernel, smem, per_sm);
      const long grid = long(sms) * occ;
      std::snprintf(label, sizeof label, "bulk %dx%d rows, %d/SM", S,
                    stage_rows, occ);
      p.run(label, grid, [&] {
        kernel<<<grid, 256, smem>>>(p.x, p.w, p.out, rows, cols, stage_rows);
      });
    };
    short_case(std::integral_constant<int, 4>{}, 16384, 2);
    short_case(std::integral_constant<int, 8>{}, 8192, 2);
    short_case(std::integral_constant<int, 4>{}, 32768, 1);
    short_case(std::integral_constant<int, 3>{}, 16384, 4);
    short_case(std::integral_constant<int, 4>{}, 16384, 3);
    release(p);
  }
}

int main(int argc, char** argv) {
  int sms;
  const double copy = device_and_copy(&sms);
  const bool fixed = argc > 1 && std::string(argv[1]) == "--fixed-long-rows";
  const bool bulk = argc > 1 && std::string(argv[1]) == "--bulk";
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::printf("== repeat %d\n", repeat);
    if (bulk) {
      bulk_rows<float, 8>("fp32", sms, copy);
      bulk_rows<__nv_bfloat16, 4>("bf16", sms, copy);
      continue;
    }
    if (fixed) {
      fixed_long_rows<float>("fp32", sms, copy);
      fixed_long_rows<__nv_bfloat16>("bf16", sms, copy);
      continue;
    }
    long_rows<float>("fp32", sms, copy);
    long_rows<__nv_bfloat16>("bf16", sms, copy);
    short_rows<float, 8>("fp32", sms, copy);
    short_rows<__nv_bfloat16, 4>("bf16", sms, copy);
  }
  return 0;
}
