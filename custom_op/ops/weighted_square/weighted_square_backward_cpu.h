// weighted_square's fused CPU backward.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <tuple>

#include "weighted_square_weight_form.h"

namespace custom_op::cpu {

// One pass over grad, x and w (grad has x's shape) computing
//   grad_x = 2 * w * x * grad   and   grad_w = x^2 * grad,
// grad_w summed over rows when w is 1-D.
std::tuple<torch::stable::Tensor, torch::stable::Tensor> weighted_square_grad(
    const torch::stable::Tensor& grad, const torch::stable::Tensor& x,
    const torch::stable::Tensor& w, weighted_square::WeightForm form);

}  // namespace custom_op::cpu
