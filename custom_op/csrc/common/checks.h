// Input checks shared by every operator and backend. Each failure names the
// operator, the argument, what was expected and what was given.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace custom_op {

using torch::stable::Tensor;

// How the weight w relates to the input x.
enum class WeightForm {
  Full,        // w has x's shape: one weight per element
  PerFeature,  // w is 1-D with x.shape[-1] elements: one weight per feature
};

// Checks x and w for an operator `op` (e.g. "custom_op::weighted_square"):
// floating dtype, same dtype, same device, w's shape; for a reduction over the
// last dimension also x.dim() >= 1. Returns the weight form.
WeightForm check_inputs(const char* op, const Tensor& x, const Tensor& w,
                        bool reduces_last_dim);

// Checks a tensor argument `arg` that must match x's dtype and device and have
// `expected_shape`: a backward operator's incoming gradient, an out= tensor.
void check_like_x(const char* op, const char* arg, const Tensor& t,
                  const Tensor& x, const std::vector<int64_t>& expected_shape);

// x.shape, or x.shape[:-1] for a reduction over the last dimension.
std::vector<int64_t> shape_of(const Tensor& x);
std::vector<int64_t> shape_without_last_dim(const Tensor& x);

}  // namespace custom_op
