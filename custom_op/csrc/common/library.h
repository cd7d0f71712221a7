// Registration macros bound to this library's operator namespace.
//
// The namespace is `custom_op` for installed builds. The JIT loop
// (custom_op/jit.py) compiles each source tree under its own namespace
// (-DCUSTOM_OP_NAMESPACE=custom_op_jit_<hash>) so a rebuilt library can be
// loaded beside the previous one in the same process.
#pragma once

#include <torch/csrc/stable/library.h>

// The operator namespace as users know it: the one place C++ spells it.
#define CUSTOM_OP_NAME custom_op

#ifndef CUSTOM_OP_NAMESPACE
#define CUSTOM_OP_NAMESPACE CUSTOM_OP_NAME
#endif

#define CUSTOM_OP_STRINGIZE_(x) #x
#define CUSTOM_OP_STRINGIZE(x) CUSTOM_OP_STRINGIZE_(x)
// "custom_op::<op>", the name messages give in every build (a JIT build
// registers under its own namespace, but users know the op by this one).
#define CUSTOM_OP_QUALIFIED(op) CUSTOM_OP_STRINGIZE(CUSTOM_OP_NAME) "::" op

// One level of indirection so CUSTOM_OP_NAMESPACE is expanded before the
// stable macros paste it into identifiers.
#define CUSTOM_OP_LIBRARY_EXPAND(ns, m) STABLE_TORCH_LIBRARY(ns, m)
#define CUSTOM_OP_IMPL_EXPAND(ns, k, m) STABLE_TORCH_LIBRARY_IMPL(ns, k, m)
#define CUSTOM_OP_FRAGMENT_EXPAND(ns, m) STABLE_TORCH_LIBRARY_FRAGMENT(ns, m)

// A build with CUDA makes two libraries: the CPU library (every .cpp file:
// the schemas, the CPU kernels) and the CUDA library (every .cu file, plus the
// .cpp files again for the helpers the kernels call, built with
// -DCUSTOM_OP_CUDA_LIBRARY). There the .cpp files' registrations compile but
// register nothing: the CPU library, loaded first, has made them.
#if defined(CUSTOM_OP_CUDA_LIBRARY) && !defined(__CUDACC__)
#define CUSTOM_OP_UNREGISTERED_(m, uid)         \
  [[maybe_unused]] static void C10_CONCATENATE( \
      custom_op_registered_by_the_cpu_library_, \
      uid)([[maybe_unused]] torch::stable::detail::StableLibrary & m)
#define CUSTOM_OP_LIBRARY(m) CUSTOM_OP_UNREGISTERED_(m, C10_UID)
#define CUSTOM_OP_FRAGMENT(m) CUSTOM_OP_UNREGISTERED_(m, C10_UID)
#define CUSTOM_OP_IMPL(k, m) CUSTOM_OP_UNREGISTERED_(m, C10_UID)
#else
// Claims the namespace (once, in csrc/library.cpp).
#define CUSTOM_OP_LIBRARY(m) CUSTOM_OP_LIBRARY_EXPAND(CUSTOM_OP_NAMESPACE, m)
// Defines one operator's schemas (its <name>_schema.cpp). A schema `float` is a
// C++ double, `int` an int64_t, `bool` a bool, `Tensor` a
// torch::stable::Tensor.
#define CUSTOM_OP_FRAGMENT(m) CUSTOM_OP_FRAGMENT_EXPAND(CUSTOM_OP_NAMESPACE, m)
// Registers kernels for one dispatch key (CPU, CUDA).
#define CUSTOM_OP_IMPL(k, m) CUSTOM_OP_IMPL_EXPAND(CUSTOM_OP_NAMESPACE, k, m)
#endif
