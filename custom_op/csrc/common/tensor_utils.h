// Small tensor helpers shared by every kernel launcher.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace custom_op {

using torch::stable::Tensor;

namespace detail {
// A C shim call's error code as an exception, as torch's stable headers do
// (their macro for it is not in every torch from 2.11).
inline void check_shim(AOTITorchError error, const char* call) {
  if (error != AOTI_TORCH_SUCCESS) {
    throw std::runtime_error(std::string("custom_op: ") + call + " failed");
  }
}

// Through the C shim's empty_strided, which allocates directly, as
// AOTInductor's generated code does: torch::stable::empty is a boxed
// dispatcher call that looks aten::empty up by name on every call.
inline Tensor empty_contiguous(const Tensor& like,
                               const std::vector<int64_t>& shape,
                               int32_t dtype) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(shape[d], 1);
  }
  int32_t device_type = 0;
  int32_t device_index = 0;
  check_shim(aoti_torch_get_device_type(like.get(), &device_type),
             "aoti_torch_get_device_type");
  check_shim(aoti_torch_get_device_index(like.get(), &device_index),
             "aoti_torch_get_device_index");
  AtenTensorHandle out = nullptr;
  check_shim(aoti_torch_empty_strided(int64_t(shape.size()), shape.data(),
                                      strides.data(), dtype, device_type,
                                      device_index, &out),
             "aoti_torch_empty_strided");
  return Tensor(out);
}
}  // namespace detail

// A new contiguous tensor of `shape` with `like`'s dtype and device.
inline Tensor empty_like_with_shape(const Tensor& like,
                                    const std::vector<int64_t>& shape) {
  int32_t dtype = 0;
  detail::check_shim(aoti_torch_get_dtype(like.get(), &dtype),
                     "aoti_torch_get_dtype");
  return detail::empty_contiguous(like, shape, dtype);
}

// The same in `like`'s accumulate type (dispatch.h's acc_t: float64 for
// float64, else float32): per-row statistics, losses, partial sums.
inline Tensor empty_acc_with_shape(const Tensor& like,
                                   const std::vector<int64_t>& shape) {
  int32_t dtype = 0;
  detail::check_shim(aoti_torch_get_dtype(like.get(), &dtype),
                     "aoti_torch_get_dtype");
  const int32_t f64 = aoti_torch_dtype_float64();
  return detail::empty_contiguous(
      like, shape, dtype == f64 ? f64 : aoti_torch_dtype_float32());
}

// A contiguous view of the data; copies only when `t` is not contiguous
// (transposed, sliced, stepped or expanded inputs).
inline Tensor dense(const Tensor& t) {
  // is_contiguous() is a cheap query; contiguous() is a dispatcher call.
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

// Whether every element of `t` is one value in memory: each dimension of
// more than one element has stride 0, as the gradient that .sum() and
// .mean() pass back (an expanded scalar).
inline bool is_one_value(const Tensor& t) {
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && strides[d] != 0) return false;
  }
  return true;
}

// A gradient as the backward kernels read it: where it is one value, in
// place (`step` 0: element i is data[i * step]) instead of a copy as large
// as the tensor; else dense (`step` 1).
struct GradView {
  Tensor data;
  int64_t step;
};

inline GradView grad_view(const Tensor& grad) {
  if (grad.numel() > 1 && is_one_value(grad)) return {grad, 0};
  return {dense(grad), 1};
}

// x seen as a [rows, cols] matrix, cols being the last dimension. A 0-dim
// tensor is one row of one element; an empty last dimension gives cols = 0.
struct RowView {
  int64_t rows;
  int64_t cols;
};

inline RowView rows_of(const Tensor& x) {
  if (x.dim() == 0) return {1, 1};
  const int64_t cols = x.size(x.dim() - 1);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return {rows, cols};
}

template <typename T>
inline const T* cdata(const Tensor& t) {
  return static_cast<const T*>(t.data_ptr());
}
template <typename T>
inline T* mdata(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

}  // namespace custom_op
