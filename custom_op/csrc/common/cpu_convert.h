// The accumulate type back to a tensor's type for the CPU kernels' inner
// loops: float to float16 and bfloat16 rounded to nearest even in branch-free
// code that GCC vectorizes (c10's conversions branch, which keeps a loop that
// stores half types scalar). The same bits as c10's conversions for every
// float, NaN included.
#pragma once

#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_exp.h"
#include "dispatch.h"

namespace custom_op::cpu {

namespace convert_detail {

CUSTOM_OP_ALWAYS_INLINE uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

CUSTOM_OP_ALWAYS_INLINE float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// All ones where `is`, else 0: a select the vectorizer keeps (a ?: becomes
// a branch).
CUSTOM_OP_ALWAYS_INLINE uint32_t mask(bool is) { return 0u - uint32_t(is); }

// c10's fp16_ieee_from_fp32_value (from FP16, Marat Dukhan): scaling by
// 2^112 then 2^-110 rounds the mantissa in float arithmetic.
CUSTOM_OP_ALWAYS_INLINE uint16_t half_bits(float f) {
  const uint32_t w = bits(f);
  const uint32_t shl1_w = w + w;
  const float base = (from_bits(w & 0x7FFFFFFFu) * from_bits(239u << 23)) *
                     from_bits(17u << 23);
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  const uint32_t rounded = bits(from_bits((bias >> 1) + 0x07800000u) + base);
  const uint32_t nonsign =
      ((rounded >> 13) & 0x00007C00u) + (rounded & 0x00000FFFu);
  const uint32_t nan = mask(shl1_w > 0xFF000000u);
  return static_cast<uint16_t>(((w & 0x80000000u) >> 16) | (nonsign & ~nan) |
                               (0x7E00u & nan));
}

CUSTOM_OP_ALWAYS_INLINE uint16_t bfloat16_bits(float f) {
  const uint32_t u = bits(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = mask((u & 0x7FFFFFFFu) > 0x7F800000u);
  return static_cast<uint16_t>((rounded & ~nan) | (0x7FC0u & nan));
}

}  // namespace convert_detail

// *out = v in T. Half types are written as their bits (a store of the struct
// keeps the loop scalar).
template <typename T>
CUSTOM_OP_ALWAYS_INLINE void store_acc(T* out, acc_t<T> v) {
  if constexpr (std::is_same_v<T, torch::headeronly::Half>) {
    out->x = convert_detail::half_bits(v);
  } else if constexpr (std::is_same_v<T, torch::headeronly::BFloat16>) {
    out->x = convert_detail::bfloat16_bits(v);
  } else {
    *out = static_cast<T>(v);
  }
}

}  // namespace custom_op::cpu
