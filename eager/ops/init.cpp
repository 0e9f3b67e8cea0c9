#include <mutex>

#include "core/error.h"
#include "core/options.h"
#include "eager/dispatch.h"
#include "eager/ops/registration.h"
#include "remat/runtime.h"

namespace dtr {

namespace {

// Note [scores]: the roofline prices an op by flops at the device's peak
// (vectorized FMA) or bytes at its bandwidth. Kernels built on scalar
// transcendentals or Philox draws run far below that peak, so their
// estimates were 6x (softmax) to 111x (randn) below the measured time, and
// the heuristics evicted and replayed them as if they were free: an LSTM
// whose randn inputs were evicted spent 37% of a budgeted step redrawing
// them. Each row adds flop-equivalents per element (measured ns per element
// x 90 GFLOP/s, the CPU peak of estimate_seconds), from benchmarks/cost_model
// on an AVX-512 Xeon, one thread. The numbers are a property of the CPU
// kernels; the CUDA roofline scales them by its own peak.
void set_scalar_work_costs() {
  struct Row {
    const char* op;
    double flops_per_element;
  };
  static constexpr Row kRows[] = {
      {"randn", 2200}, {"rand", 600},   {"randint", 700},          {"dropout", 640},
      {"softmax", 380}, {"log_softmax", 380}, {"cross_entropy", 350}, {"gelu", 130},
      {"gelu_backward", 180}, {"silu", 80}, {"silu_backward", 110},  {"tanh", 120},
      {"sigmoid", 75}, {"exp", 75},     {"log", 75},               {"batch_norm", 90},
  };
  auto& registry = OpRegistry::instance();
  for (const Row& r : kRows) {
    bool found = false;
    for (const auto& def : registry.ops()) {
      if (def->name != r.op) continue;
      def->scalar_flops_per_element = r.flops_per_element;
      found = true;
    }
    DTR_INTERNAL_ASSERT(found, "scalar work cost for unknown op '{}'", r.op);
  }
}

}  // namespace

void ensure_ops_registered() {
  // Every op reaches this on its first use. Registration runs once and is
  // all or nothing: if a family throws, the rows it and the families before
  // it added are taken out again, so a retry starts from an empty table
  // rather than failing with "defined twice". Nothing here reads the
  // environment; its errors are thrown afterwards, once, by
  // check_environment() (Note [environment at start-up]).
  static std::once_flag once;
  std::call_once(once, [] {
    auto& registry = OpRegistry::instance();
    const size_t rows_before = registry.ops().size();
    try {
      // Every family of core/op_families.h (each defined in eager/ops/<family>.cpp).
#define DTR_REGISTER_OPS(family) ops::register_##family##_ops();
      DTR_OP_FAMILIES(DTR_REGISTER_OPS)
#undef DTR_REGISTER_OPS
      set_scalar_work_costs();
      cpu::register_kernels();
      remat::Runtime::global().set_copy_fn(kCPU, device_copy_fn(kCPU));
    } catch (...) {
      registry.truncate(rows_before);
      throw;
    }
  });
  check_environment();
}

const OpDef& op(std::string_view name) {
  ensure_ops_registered();
  return OpRegistry::instance().get(name);
}

}  // namespace dtr
