// dtype dispatch over the supported floating types, written once.
#pragma once

#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

// Runs the lambda given last with `scalar_t` bound to float, double, Half
// or BFloat16. Callers check the dtype first (checks.h) for a clear message.
#define CUSTOM_OP_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)             \
  THO_DISPATCH_V2(TYPE, NAME, AT_WRAP(__VA_ARGS__), AT_FLOATING_TYPES, \
                  torch::headeronly::ScalarType::Half,                 \
                  torch::headeronly::ScalarType::BFloat16)

// Functions that both the CPU and the CUDA kernels call (an operator's math).
#if defined(__CUDACC__)
#define CUSTOM_OP_HOST_DEVICE __host__ __device__
#else
#define CUSTOM_OP_HOST_DEVICE
#endif

namespace custom_op {

// Half types are computed and accumulated in float; double stays double.
template <typename T>
struct AccumulateType {
  using type = float;
};
template <>
struct AccumulateType<double> {
  using type = double;
};
template <typename T>
using acc_t = typename AccumulateType<T>::type;

// acc_t as a dtype: what a kernel's saved statistics (a norm's rstd) have.
constexpr torch::headeronly::ScalarType acc_scalar_type(
    torch::headeronly::ScalarType t) {
  return t == torch::headeronly::ScalarType::Double
             ? torch::headeronly::ScalarType::Double
             : torch::headeronly::ScalarType::Float;
}

}  // namespace custom_op
