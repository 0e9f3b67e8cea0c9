#include <mutex>

#include "core/backend.h"
#include "core/error.h"
#include "core/options.h"
#include "eager/dispatch.h"
#include "eager/ops/registration.h"
#include "remat/runtime.h"

namespace dtr {

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
      // Every backend's kernels (the CPU's, and any other registered).
      bind_backend_kernels();
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
