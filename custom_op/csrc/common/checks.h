// Input checks shared by every operator and backend, and their message
// pieces. Each failure names the operator ("custom_op::<op>"), the argument,
// what was expected and what was given, and throws
// std::invalid_argument. custom_op/checks.py has the same checks for the fake
// kernels, with the same messages.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace custom_op {

using torch::stable::Tensor;

// Throws std::invalid_argument("<op>: <what>").
[[noreturn]] void fail(const char* op, const std::string& what);

// An operator's own check, worded as the shared ones: throws "<op>: argument
// '<arg>' must <expected>, got <got>". Python: checks.fail_argument.
[[noreturn]] void fail_argument(const char* op, const char* arg,
                                const std::string& expected,
                                const std::string& got);

// `arg` must be float32, float64, float16 or bfloat16.
void check_float(const char* op, const char* arg, const Tensor& t);

// Two inputs: both floating, the same dtype, the same device.
void check_pair(const char* op, const char* a_name, const Tensor& a,
                const char* b_name, const Tensor& b);

// `arg` (an incoming gradient, an out= tensor) must have `like`'s dtype and
// device and `expected_shape`.
void check_like(const char* op, const char* arg, const Tensor& t,
                const Tensor& like, const std::vector<int64_t>& expected_shape,
                const char* like_name = "x");

// `arg` (saved statistics, e.g. a norm's rstd) must have the accumulate dtype
// of `like` (float32 for float32, float16 and bfloat16; float64 for float64),
// `like`'s device and `expected_shape`.
void check_acc_like(const char* op, const char* arg, const Tensor& t,
                    const Tensor& like,
                    const std::vector<int64_t>& expected_shape,
                    const char* like_name = "x");

// `arg` must have a last dimension for a row-wise op to `verb` over
// ("normalize", "reduce").
void check_rows(const char* op, const char* arg, const Tensor& t,
                const char* verb);

// A per-feature weight of an op over x's last dimension (x checked by
// check_rows first): w is 1-D with x.shape[-1] elements.
void check_last_dim_weight(const char* op, const char* x_name, const Tensor& x,
                           const char* w_name, const Tensor& w);

// `arg` must have `ndim` dimensions, laid out as `layout` says ("[N, V] (a row
// of V class scores per sample)").
void check_ndim(const char* op, const char* arg, const Tensor& t, int64_t ndim,
                const char* layout);

// `arg`'s dimension `dim` must not be empty; `what` says what it holds ("at
// least one class (V = logits.shape[1] > 0)").
void check_dim_nonempty(const char* op, const char* arg, const Tensor& t,
                        int64_t dim, const char* what);

// `arg` (labels, positions, indices): int64, on `like`'s device, 1-D with one
// value per row of `like` (like.shape[0] values).
void check_index_per_row(const char* op, const char* arg, const Tensor& t,
                         const Tensor& like, const char* like_name);

// A scalar argument such as eps: finite and >= 0.
void check_finite_nonnegative(const char* op, const char* arg, double value);

// The pieces of messages: "[3, 4]", "cuda:0", "bfloat16", "1e-06".
std::string shape_str(const std::vector<int64_t>& shape);
std::string device_str(const Tensor& t);
std::string dtype_str(torch::headeronly::ScalarType t);
// The shortest text that reads back as `v`, as Python's repr(float(v))
// writes it without a trailing ".0": "-1", "0.5", "0.0001", "1e-06",
// "1e+16", "inf", "nan".
std::string number_str(double v);

// x.shape, or x.shape[:-1] for a reduction over the last dimension.
std::vector<int64_t> shape_of(const Tensor& x);
std::vector<int64_t> shape_without_last_dim(const Tensor& x);

}  // namespace custom_op
