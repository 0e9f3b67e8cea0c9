// CPU kernel families. Each cpu/<family>.cpp defines
// `register_<family>_kernels()`, which calls OpRegistry::set_kernel for its
// ops. Kernels are plain functions over KernelContext; results never depend
// on the thread count (Note [determinism]).
#pragma once

#include "core/element.h"
#include "core/error.h"
#include "core/op_registry.h"
#include "core/parallel.h"

namespace dtr::cpu {

void register_copy_kernels();
void register_creation_kernels();
void register_unary_kernels();
void register_binary_kernels();
void register_reduce_kernels();
void register_linalg_kernels();
void register_nn_functional_kernels();
void register_norm_kernels();
void register_loss_kernels();
void register_conv_kernels();
void register_index_kernels();
void register_attention_kernels();

/// Registers `fn` as the CPU kernel of op `name`.
inline void set_cpu_kernel(std::string_view name, KernelFn fn) {
  OpRegistry::instance().set_kernel(name, DeviceType::kCPU, fn);
}

/// Calls f(T*) with T the C++ type of `dtype` for float32/float64 (the
/// types CPU math runs in), throwing NotImplementedError for others.
template <typename F>
void float_dispatch(DType dtype, std::string_view op, F&& f) {
  switch (dtype) {
    case kFloat32: f(float{}); return;
    case kFloat64: f(double{}); return;
    default:
      throw NotImplementedError(fmt::format("{}: no CPU kernel for dtype {}", op, dtype_name(dtype)));
  }
}

}  // namespace dtr::cpu
