// Small tensor helpers shared by every kernel launcher.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <vector>

namespace custom_op {

using torch::stable::Tensor;

// A new contiguous tensor of `shape` with `like`'s dtype and device.
inline Tensor empty_like_with_shape(const Tensor& like,
                                    const std::vector<int64_t>& shape) {
  return torch::stable::empty(shape, like.scalar_type(), std::nullopt,
                              like.device());
}

// A contiguous view of the data; copies only when `t` is not contiguous
// (transposed, sliced, stepped or expanded inputs).
inline Tensor dense(const Tensor& t) {
  // is_contiguous() is a cheap query; contiguous() is a dispatcher call.
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
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
