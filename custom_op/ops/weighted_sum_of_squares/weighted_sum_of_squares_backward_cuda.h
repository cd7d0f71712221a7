// weighted_sum_of_squares' fused CUDA backward.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <tuple>

#include "weighted_sum_of_squares_weight_form.h"

namespace custom_op::cuda {

// One pass over grad, x and w (grad has one value per row of x) computing
//   grad_x = 2 * w * x * grad[row]   and   grad_w = x^2 * grad[row],
// grad_w summed over rows when w is 1-D: in an order fixed by the launch when
// `deterministic`, else in the faster order the blocks happen to take the
// rows (grad_w's rounding can then differ between runs).
std::tuple<torch::stable::Tensor, torch::stable::Tensor>
weighted_sum_of_squares_grad(const torch::stable::Tensor& grad,
                             const torch::stable::Tensor& x,
                             const torch::stable::Tensor& w,
                             weighted_sum_of_squares::WeightForm form,
                             bool deterministic);

}  // namespace custom_op::cuda
