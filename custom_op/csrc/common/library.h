// Registration macros bound to this library's operator namespace.
//
// The namespace is `custom_op` for installed builds. The JIT loop
// (custom_op/jit.py) compiles each source tree under its own namespace
// (-DCUSTOM_OP_NAMESPACE=custom_op_jit_<hash>) so a rebuilt library can be
// loaded beside the previous one in the same process.
#pragma once

#include <torch/csrc/stable/library.h>

#ifndef CUSTOM_OP_NAMESPACE
#define CUSTOM_OP_NAMESPACE custom_op
#endif

// One level of indirection so CUSTOM_OP_NAMESPACE is expanded before the
// stable macros paste it into identifiers.
#define CUSTOM_OP_LIBRARY_EXPAND(ns, m) STABLE_TORCH_LIBRARY(ns, m)
#define CUSTOM_OP_IMPL_EXPAND(ns, k, m) STABLE_TORCH_LIBRARY_IMPL(ns, k, m)

// Defines the schemas (once, in registration.cpp).
#define CUSTOM_OP_LIBRARY(m) CUSTOM_OP_LIBRARY_EXPAND(CUSTOM_OP_NAMESPACE, m)
// Registers kernels for one dispatch key (CPU, CUDA).
#define CUSTOM_OP_IMPL(k, m) CUSTOM_OP_IMPL_EXPAND(CUSTOM_OP_NAMESPACE, k, m)
