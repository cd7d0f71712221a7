// weighted_sum_of_squares' fused CPU backward.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <tuple>

#include "weighted_sum_of_squares_weight_form.h"

namespace custom_op::cpu {

// One pass over grad, x and w (grad has one value per row of x) computing
//   grad_x = 2 * w * x * grad[row]   and   grad_w = x^2 * grad[row],
// grad_w summed over rows when w is 1-D.
std::tuple<torch::stable::Tensor, torch::stable::Tensor>
weighted_sum_of_squares_grad(const torch::stable::Tensor& grad,
                             const torch::stable::Tensor& x,
                             const torch::stable::Tensor& w,
                             weighted_sum_of_squares::WeightForm form);

}  // namespace custom_op::cpu
