// The input checks of cross_entropy, once for the CPU and CUDA kernels.
// Python's fake kernels raise the same messages (__init__.py).
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "common/checks.h"
#include "common/library.h"

namespace custom_op::cross_entropy_checks {

// The name every message gives, for the _forward and _backward kernels too.
constexpr const char* kOp = CUSTOM_OP_QUALIFIED("cross_entropy");

// The layout the messages name, as the fake kernels' (__init__.py) do.
constexpr const char* kLogitsLayout =
    "[N, V] (a row of V class scores per sample)";
constexpr const char* kOneClass =
    "at least one class (V = logits.shape[1] > 0)";

// logits: [N, V] floating, V > 0; labels: int64 [N] on logits' device.
inline void check_inputs(const Tensor& logits, const Tensor& labels) {
  check_float(kOp, "logits", logits);
  check_ndim(kOp, "logits", logits, 2, kLogitsLayout);
  check_dim_nonempty(kOp, "logits", logits, 1, kOneClass);
  check_index_per_row(kOp, "labels", labels, logits, "logits");
}

// grad and lse: one value per row in the accumulate dtype (float64 for
// float64 logits, else float32).
inline void check_backward(const Tensor& grad, const Tensor& logits,
                           const Tensor& labels, const Tensor& lse) {
  check_inputs(logits, labels);
  check_acc_like(kOp, "grad", grad, logits, {logits.size(0)}, "logits");
  check_acc_like(kOp, "lse", lse, logits, {logits.size(0)}, "logits");
}

// Every label a class index in [0, V) or ignore_index (the CPU kernels read
// them on the host; the CUDA kernels do not synchronize to check).
inline void check_labels_in_range(const int64_t* labels, int64_t rows,
                                  int64_t classes, int64_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = labels[r];
    if (label != ignore_index && (label < 0 || label >= classes)) {
      fail_argument(
          kOp, "labels",
          "hold class indices in [0, " + std::to_string(classes) +
              ") or ignore_index " + std::to_string(ignore_index),
          std::to_string(label) + " at labels[" + std::to_string(r) + "]");
    }
  }
}

}  // namespace custom_op::cross_entropy_checks
