#include "cpu/kernels.h"

namespace dtr::cpu {

void register_kernels() {
  // Every family of core/op_families.h (each defined in cpu/<family>.cpp).
#define DTR_REGISTER_KERNELS(family) register_##family##_kernels();
  DTR_OP_FAMILIES(DTR_REGISTER_KERNELS)
#undef DTR_REGISTER_KERNELS
}

}  // namespace dtr::cpu
