#include "checks.h"

#include <torch/headeronly/core/ScalarType.h>

#include <stdexcept>
#include <string>

// Messages are built with std::string and std::to_string, never iostreams: a
// stream's number formatting goes through the C++ runtime's global locale, and
// a library linked against a second copy of that runtime (a toolchain that
// links libstdc++ statically) crashed there or dropped every number. The build
// refuses such a library (custom_op/cxx_runtime.py); this keeps the error path
// free of global state either way.
namespace custom_op {
namespace {

using torch::headeronly::ScalarType;

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string device_str(const Tensor& t) {
  if (t.is_cpu()) return "cpu";
  return std::string(t.is_cuda() ? "cuda" : "device") + ":" +
         std::to_string(int(t.get_device_index()));
}

// Invalid arguments surface in Python as RuntimeError with this message.
[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

// The dtype as Python spells it (torch.float32 -> "float32").
std::string dtype_str(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
      return "uint8";
    case ScalarType::Char:
      return "int8";
    case ScalarType::Short:
      return "int16";
    case ScalarType::Int:
      return "int32";
    case ScalarType::Long:
      return "int64";
    case ScalarType::Half:
      return "float16";
    case ScalarType::Float:
      return "float32";
    case ScalarType::Double:
      return "float64";
    case ScalarType::ComplexHalf:
      return "complex32";
    case ScalarType::ComplexFloat:
      return "complex64";
    case ScalarType::ComplexDouble:
      return "complex128";
    case ScalarType::Bool:
      return "bool";
    case ScalarType::BFloat16:
      return "bfloat16";
    default:
      return torch::headeronly::toString(t);
  }
}

bool is_supported_float(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double ||
         t == ScalarType::Half || t == ScalarType::BFloat16;
}

void check_float(const char* op, const char* arg, const Tensor& t) {
  if (!is_supported_float(t.scalar_type())) {
    fail(op, std::string("argument '") + arg +
                 "' must have dtype float32, float64, float16 or bfloat16, "
                 "got " +
                 dtype_str(t.scalar_type()));
  }
}

}  // namespace

std::vector<int64_t> shape_of(const Tensor& x) {
  auto sizes = x.sizes();
  return std::vector<int64_t>(sizes.begin(), sizes.end());
}

std::vector<int64_t> shape_without_last_dim(const Tensor& x) {
  auto shape = shape_of(x);
  shape.pop_back();
  return shape;
}

WeightForm check_inputs(const char* op, const Tensor& x, const Tensor& w,
                        bool reduces_last_dim) {
  check_float(op, "x", x);
  check_float(op, "w", w);
  if (x.scalar_type() != w.scalar_type()) {
    fail(op, "arguments 'x' and 'w' must have the same dtype, got x " +
                 dtype_str(x.scalar_type()) + " and w " +
                 dtype_str(w.scalar_type()));
  }
  if (!(x.device() == w.device())) {
    fail(op, "arguments 'x' and 'w' must be on the same device, got x on " +
                 device_str(x) + " and w on " + device_str(w));
  }
  const auto x_shape = shape_of(x);
  const auto w_shape = shape_of(w);
  if (reduces_last_dim && x.dim() == 0) {
    fail(op,
         "argument 'x' must have at least 1 dimension to reduce over its "
         "last one, got a 0-dim tensor of shape []");
  }
  if (w_shape == x_shape) return WeightForm::Full;
  if (x.dim() >= 1 && w.dim() == 1 && w_shape[0] == x_shape.back()) {
    return WeightForm::PerFeature;
  }
  std::string s = "argument 'w' must have x's shape " + shape_str(x_shape);
  if (x.dim() >= 1) {
    s += " or be 1-D with x.shape[-1] = " + std::to_string(x_shape.back()) +
         " elements";
  }
  s += ", got shape " + shape_str(w_shape) + " for x of shape " +
       shape_str(x_shape);
  fail(op, s);
}

void check_like_x(const char* op, const char* arg, const Tensor& t,
                  const Tensor& x, const std::vector<int64_t>& expected_shape) {
  const std::string name = std::string("argument '") + arg + "'";
  if (t.scalar_type() != x.scalar_type()) {
    fail(op, name + " must have x's dtype " + dtype_str(x.scalar_type()) +
                 ", got " + dtype_str(t.scalar_type()));
  }
  if (!(t.device() == x.device())) {
    fail(op, name + " must be on x's device " + device_str(x) + ", got " +
                 device_str(t));
  }
  if (shape_of(t) != expected_shape) {
    fail(op, name + " must have the shape " + shape_str(expected_shape) +
                 ", got " + shape_str(shape_of(t)));
  }
}

}  // namespace custom_op
