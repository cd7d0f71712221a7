// The fused CUDA backward shared by both operators.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <tuple>

#include "weighted_square_weight_form.h"

namespace custom_op::cuda {

// One pass over grad, x and w computing
//   grad_x = 2 * w * x * g   and   grad_w = x^2 * g,
// where g is grad[i] (elementwise op) or grad[row] (grad_per_row: reduction
// over the last dimension), and grad_w is summed over rows when w is 1-D:
// in an order fixed by the launch when `deterministic`, else in the faster
// order the blocks happen to take the rows (grad_w's rounding can then
// differ between runs).
std::tuple<torch::stable::Tensor, torch::stable::Tensor> weighted_grad(
    const torch::stable::Tensor& grad, const torch::stable::Tensor& x,
    const torch::stable::Tensor& w, WeightForm form, bool grad_per_row,
    bool deterministic);

}  // namespace custom_op::cuda
