#include "checks.h"

#include <torch/headeronly/core/ScalarType.h>

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dispatch.h"

// Messages are built with std::string and std::to_string, never iostreams: a
// stream's number formatting goes through the C++ runtime's global locale, and
// a library linked against a second copy of that runtime (a toolchain that
// links libstdc++ statically) crashed there or dropped every number. The build
// refuses such a library (custom_op/cxx_runtime.py); this keeps the error path
// free of global state either way.
namespace custom_op {

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

// The Python API raises this as ValueError on every torch
// (custom_op/_dispatch.py).
[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

[[noreturn]] void fail_argument(const char* op, const char* arg,
                                const std::string& expected,
                                const std::string& got) {
  fail(op,
       std::string("argument '") + arg + "' must " + expected + ", got " + got);
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

static bool is_supported_float(ScalarType t) {
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

std::vector<int64_t> shape_of(const Tensor& x) {
  auto sizes = x.sizes();
  return std::vector<int64_t>(sizes.begin(), sizes.end());
}

std::vector<int64_t> shape_without_last_dim(const Tensor& x) {
  auto shape = shape_of(x);
  shape.pop_back();
  return shape;
}

void check_pair(const char* op, const char* a_name, const Tensor& a,
                const char* b_name, const Tensor& b) {
  check_float(op, a_name, a);
  check_float(op, b_name, b);
  const std::string names =
      std::string("arguments '") + a_name + "' and '" + b_name + "'";
  if (a.scalar_type() != b.scalar_type()) {
    fail(op, names + " must have the same dtype, got " + a_name + " " +
                 dtype_str(a.scalar_type()) + " and " + b_name + " " +
                 dtype_str(b.scalar_type()));
  }
  if (!(a.device() == b.device())) {
    fail(op, names + " must be on the same device, got " + a_name + " on " +
                 device_str(a) + " and " + b_name + " on " + device_str(b));
  }
}

// `t` must have `dtype` (`dtype_what` says whose), `like`'s device and
// `expected_shape`.
static void check_dtype_device_shape(
    const char* op, const char* arg, const Tensor& t, ScalarType dtype,
    const std::string& dtype_what, const Tensor& like, const char* like_name,
    const std::vector<int64_t>& expected_shape) {
  const std::string name = std::string("argument '") + arg + "'";
  if (t.scalar_type() != dtype) {
    fail(op, name + " must have " + dtype_what + ", got " +
                 dtype_str(t.scalar_type()));
  }
  if (!(t.device() == like.device())) {
    fail(op, name + " must be on " + like_name + "'s device " +
                 device_str(like) + ", got " + device_str(t));
  }
  if (shape_of(t) != expected_shape) {
    fail(op, name + " must have the shape " + shape_str(expected_shape) +
                 ", got " + shape_str(shape_of(t)));
  }
}

void check_like(const char* op, const char* arg, const Tensor& t,
                const Tensor& like, const std::vector<int64_t>& expected_shape,
                const char* like_name) {
  check_dtype_device_shape(
      op, arg, t, like.scalar_type(),
      std::string(like_name) + "'s dtype " + dtype_str(like.scalar_type()),
      like, like_name, expected_shape);
}

void check_acc_like(const char* op, const char* arg, const Tensor& t,
                    const Tensor& like,
                    const std::vector<int64_t>& expected_shape,
                    const char* like_name) {
  const ScalarType acc = acc_scalar_type(like.scalar_type());
  check_dtype_device_shape(op, arg, t, acc,
                           "dtype " + dtype_str(acc) + " (the accumulate " +
                               "dtype of " + like_name + "'s " +
                               dtype_str(like.scalar_type()) + ")",
                           like, like_name, expected_shape);
}

void check_rows(const char* op, const char* arg, const Tensor& t,
                const char* verb) {
  if (t.dim() == 0) {
    fail(op, std::string("argument '") + arg +
                 "' must have at least 1 dimension to " + verb +
                 " over its last one, got a 0-dim tensor of shape []");
  }
}

void check_last_dim_weight(const char* op, const char* x_name, const Tensor& x,
                           const char* w_name, const Tensor& w) {
  const int64_t cols = x.size(x.dim() - 1);
  if (w.dim() != 1 || w.size(0) != cols) {
    const std::string h = std::to_string(cols);
    fail(op, std::string("argument '") + w_name + "' must have shape [" + h +
                 "] (" + x_name + ".shape[-1] = " + h + "), got shape " +
                 shape_str(shape_of(w)) + " for " + x_name + " of shape " +
                 shape_str(shape_of(x)));
  }
}

void check_ndim(const char* op, const char* arg, const Tensor& t, int64_t ndim,
                const char* layout) {
  if (t.dim() != ndim) {
    fail(op, std::string("argument '") + arg + "' must be " +
                 std::to_string(ndim) + "-D " + layout + ", got shape " +
                 shape_str(shape_of(t)));
  }
}

void check_dim_nonempty(const char* op, const char* arg, const Tensor& t,
                        int64_t dim, const char* what) {
  if (t.size(dim) == 0) {
    fail(op, std::string("argument '") + arg + "' must have " + what +
                 ", got shape " + shape_str(shape_of(t)));
  }
}

void check_index_per_row(const char* op, const char* arg, const Tensor& t,
                         const Tensor& like, const char* like_name) {
  if (t.scalar_type() != ScalarType::Long) {
    fail(op, std::string("argument '") + arg + "' must have dtype int64, got " +
                 dtype_str(t.scalar_type()));
  }
  if (!(t.device() == like.device())) {
    const std::string name = like_name;
    const char* s = !name.empty() && name.back() == 's' ? "'" : "'s";
    fail(op, std::string("argument '") + arg + "' must be on " + name + s +
                 " device " + device_str(like) + ", got " + device_str(t));
  }
  const std::string n = std::to_string(like.size(0));
  if (t.dim() != 1 || t.size(0) != like.size(0)) {
    fail(op, std::string("argument '") + arg + "' must have shape [" + n +
                 "] (" + like_name + ".shape[0] = " + n + "), got shape " +
                 shape_str(shape_of(t)));
  }
}

void check_finite_nonnegative(const char* op, const char* arg, double value) {
  if (!std::isfinite(value) || value < 0) {
    fail(op, std::string("argument '") + arg +
                 "' must be a finite number >= 0, got " + number_str(value));
  }
}

// Python's rule: positional notation for exponents -4 to 15, else
// scientific; the digits are the shortest that read back as v (to_chars,
// which uses no locale).
std::string number_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];  // "-d.dddddddddddddddde-308" at most
  const auto end =
      std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific)
          .ptr;
  const std::string sci(buf, end);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  if (exponent < -4 || exponent >= 16) return sci;
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(-exponent - 1, '0') + digits;
  } else {
    if (digits.size() < size_t(exponent) + 1) digits.resize(exponent + 1, '0');
    out = digits.substr(0, exponent + 1);
    if (digits.size() > size_t(exponent) + 1) {
      out += "." + digits.substr(exponent + 1);
    }
  }
  return negative ? "-" + out : out;
}

}  // namespace custom_op
