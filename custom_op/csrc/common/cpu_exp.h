// exp for the CPU kernels' inner loops: Cephes' range reduction and
// polynomials in branch-free code that GCC vectorizes (a loop calling
// std::exp stays scalar). Call it from a CUSTOM_OP_CPU_CLONES loop to get each
// vector width.
//
// Guarantees: float within 1 ulp of the correctly rounded exp on [-87.33,
// 88.72], double within 2 ulp on [-708.39, 709.78], with and without FMA; below
// that range 0 (no subnormal results; -inf gives 0), above it +inf, NaN for
// NaN.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__GNUC__)
#define CUSTOM_OP_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CUSTOM_OP_ALWAYS_INLINE inline
#endif

namespace custom_op::cpu {

namespace exp_detail {

template <typename To, typename From>
CUSTOM_OP_ALWAYS_INLINE To bits(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  std::memcpy(&out, &v, sizeof(out));
  return out;
}

// All ones where `is`, else 0.
CUSTOM_OP_ALWAYS_INLINE uint32_t mask(bool is) { return 0u - uint32_t(is); }
CUSTOM_OP_ALWAYS_INLINE uint64_t mask64(bool is) { return 0u - uint64_t(is); }

}  // namespace exp_detail

CUSTOM_OP_ALWAYS_INLINE float vec_exp(float x) {
  using exp_detail::bits;
  constexpr float kMin = -87.3365447505f;  // log(2^-126), the least normal
  constexpr float kMax = 88.7228391117f;   // log(FLT_MAX)
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 in two parts: n * kLn2Hi is exact.
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: t + kRound rounds t
  // x = n ln 2 + r, n an integer, |r| <= ln 2 / 2. No clamp: outside the
  // range n and r are garbage that the masks at the end replace (a clamp's
  // select, merged with theirs, became branches only AVX-512 vectorizes).
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  // exp(r) = 1 + r + r^2 p(r) (Cephes expf).
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * (r * r) + r + 1.0f;
  // 2^n as two powers of two, each a float exponent field (n is -126..128 in
  // the range; unsigned arithmetic: outside it n overflows nothing).
  const int32_t ni =
      static_cast<int32_t>(bits<uint32_t>(t) - bits<uint32_t>(kRound));
  const int32_t n1 = ni >> 1;
  const float s1 = bits<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = bits<float>(static_cast<uint32_t>(ni - n1 + 127) << 23);
  const float y = e * s1 * s2;
  // Below the range 0, above it +inf, NaN (no mask) NaN.
  const uint32_t low = exp_detail::mask(x < kMin);
  const uint32_t high = exp_detail::mask(x > kMax);
  return bits<float>((bits<uint32_t>(y) & ~(low | high)) |
                     (0x7F800000u & high));
}

CUSTOM_OP_ALWAYS_INLINE double vec_exp(double x) {
  using exp_detail::bits;
  constexpr double kMin = -708.39641853226410622;  // log(2^-1022)
  constexpr double kMax = 709.78271289338399684;   // log(DBL_MAX)
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93145751953125e-1;
  constexpr double kLn2Lo = 1.42860682030941723212e-6;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52
  const double t = x * kLog2e + kRound;
  const double n = t - kRound;
  const double r = (x - n * kLn2Hi) - n * kLn2Lo;
  // exp(r) = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)) (Cephes exp).
  const double rr = r * r;
  const double pr =
      r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr +
           9.99999999999999999910e-1);
  const double q =
      ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr +
       2.27265548208155028766e-1) *
          rr +
      2.00000000000000000009e0;
  const double e = 1.0 + 2.0 * (pr / (q - pr));
  const int64_t ni =
      static_cast<int64_t>(bits<uint64_t>(t) - bits<uint64_t>(kRound));
  const int64_t n1 = ni >> 1;
  const double s1 = bits<double>(static_cast<uint64_t>(n1 + 1023) << 52);
  const double s2 = bits<double>(static_cast<uint64_t>(ni - n1 + 1023) << 52);
  const double y = e * s1 * s2;
  const uint64_t low = exp_detail::mask64(x < kMin);
  const uint64_t high = exp_detail::mask64(x > kMax);
  return bits<double>((bits<uint64_t>(y) & ~(low | high)) |
                      (0x7FF0000000000000u & high));
}

}  // namespace custom_op::cpu
