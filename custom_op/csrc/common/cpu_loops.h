// Loop helpers for the CPU kernels: multiversioned hot loops, the grain of a
// parallel task, flat ranges split at row boundaries, and multi-accumulator
// sums that compilers vectorize without -ffast-math.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dispatch.h"

// Hot loops are compiled for AVX-512, AVX2 and baseline x86-64, and the best
// for the machine is chosen when the library loads (GCC function
// multiversioning): one portable binary that still uses the machine's vector
// width, as Inductor's code compiled for the host does.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CUSTOM_OP_CPU_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CUSTOM_OP_CPU_CLONES
#endif

// Before a loop: its iterations carry no dependence through memory (each
// element is read before it is written), so the vectorizer need not check.
#if defined(__clang__)
#define CUSTOM_OP_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define CUSTOM_OP_IVDEP _Pragma("GCC ivdep")
#else
#define CUSTOM_OP_IVDEP
#endif

namespace custom_op::cpu {

// Elements per parallel task, as ATen's GRAIN_SIZE.
constexpr int64_t kGrainSize = 32768;

// Rows per parallel task of a row-wise kernel: about kGrainSize elements.
inline int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, cols));
}

// Calls f(i, j, len) for each piece of the flat range [begin, end) that stays
// within one row of `cols` elements: i is the flat index, j the column.
template <typename F>
inline void for_each_row_piece(int64_t begin, int64_t end, int64_t cols,
                               const F& f) {
  int64_t i = begin;
  while (i < end) {
    const int64_t j = i % cols;
    const int64_t len = std::min(end - i, cols - j);
    f(i, j, len);
    i += len;
  }
}

// sum_{k < len} term(k) in A, with kLanes independent partial sums: the
// reduction becomes element-wise work the vectorizer handles, in a summation
// order fixed by len alone (deterministic results). Inlined into its caller:
// call it from a CUSTOM_OP_CPU_CLONES function to get each vector width.
template <typename A, typename Term>
inline A sum_lanes(int64_t len, const Term& term) {
  constexpr int kLanes = 64 / sizeof(A);
  A lanes[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= len; k += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(k + l);
  }
  A tail = 0;
  for (; k < len; ++k) tail += term(k);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0] + tail;
}

// sum_k x[k]^2 in the accumulation type (sum_lanes).
template <typename T>
inline acc_t<T> sum_of_squares(const T* __restrict x, int64_t len) {
  using A = acc_t<T>;
  return sum_lanes<A>(len, [&](int64_t k) {
    const A v = static_cast<A>(x[k]);
    return v * v;
  });
}

}  // namespace custom_op::cpu
