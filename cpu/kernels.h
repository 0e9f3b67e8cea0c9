// CPU kernel families (core/op_families.h). Each cpu/<family>.cpp defines
// `register_<family>_kernels()`, which binds the kernels of its rows once at
// start-up (set_cpu_kernel); dispatch reads them from the rows. Kernels are
// plain functions over KernelContext; results never depend on the thread
// count (Note [determinism]).
#pragma once

#include "core/element.h"
#include "core/error.h"
#include "core/op_families.h"
#include "core/op_registry.h"
#include "core/parallel.h"

namespace dtr::cpu {

#define DTR_DECLARE_KERNELS(family) void register_##family##_kernels();
DTR_OP_FAMILIES(DTR_DECLARE_KERNELS)
#undef DTR_DECLARE_KERNELS

/// Binds every CPU kernel into the op rows (cpu/register.cpp): the CPU
/// backend's register_kernels slot (cpu/backend.cpp).
void register_kernels();

/// Binds `fn` as the CPU kernel of op `name` (a start-up lookup by name;
/// InternalError for an unknown op).
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
