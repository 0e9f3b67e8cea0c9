#include <mutex>

#include "eager/dispatch.h"
#include "eager/ops/registration.h"
#include "remat/runtime.h"

namespace dtr {

void ensure_ops_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    // One line per op family (each defined in eager/ops/<family>.cpp).
    ops::register_copy_ops();
    ops::register_creation_ops();
    ops::register_view_ops();
    ops::register_index_ops();
    ops::register_linalg_ops();
    ops::register_conv_ops();
    ops::register_nn_functional_ops();
    ops::register_unary_ops();
    ops::register_binary_ops();
    ops::register_reduce_ops();
    ops::register_loss_ops();
    ops::register_norm_ops();
    // @@op-families@@
    cpu::register_kernels();
    remat::Runtime::global().set_copy_fn(kCPU, device_copy_fn(kCPU));
  });
}

const OpDef& op(std::string_view name) {
  ensure_ops_registered();
  return OpRegistry::instance().get(name);
}

}  // namespace dtr
