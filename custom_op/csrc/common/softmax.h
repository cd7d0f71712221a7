// Online softmax: a row's normalizer built from pieces taken in any order.
// A piece is its largest value `max` and sum = sum_k exp(x_k - max); two
// pieces merge by rescaling the sum of the smaller max. Merging is
// commutative bit for bit, so any fixed merge order gives the same bits on
// every run; the empty piece is {-inf, 0}; log(sum_k exp(x_k)) = max +
// log(sum). A piece whose values are all -inf is {-inf, 0} too (no NaN from
// -inf - -inf).
#pragma once

#include <cmath>

#include "dispatch.h"

namespace custom_op {

// exp for the merges: the fast hardware exp on a GPU (float), std::exp on the
// host.
CUSTOM_OP_HOST_DEVICE inline float softmax_exp(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return std::exp(x);
#endif
}
CUSTOM_OP_HOST_DEVICE inline double softmax_exp(double x) {
  using std::exp;
  return exp(x);
}

template <typename A>
struct SoftmaxSum {
  A max;
  A sum;

  CUSTOM_OP_HOST_DEVICE static SoftmaxSum empty() { return {-INFINITY, A(0)}; }

  // What a piece subtracts before exp: its max, or 0 while every value seen
  // is -inf (each exp is then 0, not exp(-inf - -inf) = NaN).
  CUSTOM_OP_HOST_DEVICE static A shift(A max) {
    return max == -INFINITY ? A(0) : max;
  }

  CUSTOM_OP_HOST_DEVICE A log_sum_exp() const {
    using std::log;
    return max + log(sum);
  }
};

template <typename A>
CUSTOM_OP_HOST_DEVICE inline SoftmaxSum<A> merge(SoftmaxSum<A> a,
                                                 SoftmaxSum<A> b) {
  if (a.max < b.max) {
    const SoftmaxSum<A> t = a;
    a = b;
    b = t;
  }
  if (b.sum == A(0)) return a;  // empty, or nothing but -inf
  return {a.max, a.sum + b.sum * softmax_exp(b.max - a.max)};
}

}  // namespace custom_op
