// The CPU kernels' softmax pieces over a row: max and sum of exp in the
// accumulate type, vectorized (multi-accumulator lanes, cpu_exp.h's exp),
// combined with softmax.h's online merge. Inlined into their callers: call
// them from a CUSTOM_OP_CPU_CLONES function to get each vector width.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu_exp.h"
#include "cpu_loops.h"
#include "dispatch.h"
#include "softmax.h"

namespace custom_op::cpu {

// Elements of a row taken at a time: read twice (max, then exp), the second
// time from L1.
constexpr int64_t kSoftmaxPiece = 2048;

// max_k x[k] with kLanes independent maxima (a NaN is passed over; its exp
// makes the sum NaN).
template <typename A>
CUSTOM_OP_ALWAYS_INLINE A max_lanes(const A* __restrict x, int64_t len) {
  constexpr int kLanes = 64 / sizeof(A);
  A lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = -INFINITY;
  int64_t k = 0;
  for (; k + kLanes <= len; k += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      lanes[l] = x[k + l] > lanes[l] ? x[k + l] : lanes[l];
    }
  }
  A m = -INFINITY;
  for (; k < len; ++k) m = x[k] > m ? x[k] : m;
  for (int l = 0; l < kLanes; ++l) m = lanes[l] > m ? lanes[l] : m;
  return m;
}

// x[0..len) in the accumulate type: x itself when it is already, else
// converted into buf (at least len elements).
template <typename T>
CUSTOM_OP_ALWAYS_INLINE const acc_t<T>* as_acc(const T* __restrict x,
                                               acc_t<T>* __restrict buf,
                                               int64_t len) {
  if constexpr (std::is_same_v<T, acc_t<T>>) {
    return x;
  } else {
    for (int64_t k = 0; k < len; ++k) buf[k] = static_cast<acc_t<T>>(x[k]);
    return buf;
  }
}

// The softmax piece {max, sum exp(x - max)} of x[0..len), kSoftmaxPiece
// elements at a time, merged in order.
template <typename T>
CUSTOM_OP_ALWAYS_INLINE SoftmaxSum<acc_t<T>> softmax_sum(const T* __restrict x,
                                                         int64_t len) {
  using A = acc_t<T>;
  alignas(64) A buf[std::is_same_v<T, A> ? 1 : kSoftmaxPiece];
  SoftmaxSum<A> total = SoftmaxSum<A>::empty();
  for (int64_t p = 0; p < len; p += kSoftmaxPiece) {
    const int64_t n = std::min(kSoftmaxPiece, len - p);
    const A* v = as_acc(x + p, buf, n);
    const A m = max_lanes(v, n);
    const A shift = SoftmaxSum<A>::shift(m);
    const A s =
        sum_lanes<A>(n, [&](int64_t k) { return vec_exp(v[k] - shift); });
    total = merge(total, SoftmaxSum<A>{m, s});
  }
  return total;
}

}  // namespace custom_op::cpu
