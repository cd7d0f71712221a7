// dtype dispatch over the supported floating types, written once.
#pragma once

#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <stdexcept>
#include <string>

#include "common/checks.h"

// Runs the lambda given last with `scalar_t` bound to float, double, Half
// or BFloat16. Callers check the dtype first (checks.h) for a clear message.
// The lambda is never an argument of another macro, so its commas (a launch's
// <<<grid, threads>>>, a template's <scalar_t, 4, true>) stay its own.
#define CUSTOM_OP_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)          \
  ::custom_op::detail::dispatch_floating(                           \
      (TYPE), (NAME), [&](auto custom_op_type_) -> decltype(auto) { \
        using scalar_t = typename decltype(custom_op_type_)::type;  \
        return (__VA_ARGS__)();                                     \
      })

namespace custom_op::detail {

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename F>
decltype(auto) dispatch_floating(torch::headeronly::ScalarType t,
                                 const char* name, F&& body) {
  using torch::headeronly::ScalarType;
  switch (t) {
    case ScalarType::Float:
      return body(TypeTag<float>{});
    case ScalarType::Double:
      return body(TypeTag<double>{});
    case ScalarType::Half:
      return body(TypeTag<torch::headeronly::Half>{});
    case ScalarType::BFloat16:
      return body(TypeTag<torch::headeronly::BFloat16>{});
    default:
      throw std::invalid_argument(std::string(name) + ": no kernel for dtype " +
                                  dtype_str(t));
  }
}

}  // namespace custom_op::detail

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
