#include "cpu/kernels.h"

namespace dtr::cpu {

void register_kernels() {
  // One line per kernel family (each defined in cpu/<family>.cpp).
  register_copy_kernels();
  register_creation_kernels();
  register_index_kernels();
  register_linalg_kernels();
  register_conv_kernels();
  register_nn_functional_kernels();
  register_unary_kernels();
  register_binary_kernels();
  register_reduce_kernels();
  register_loss_kernels();
  register_norm_kernels();
  // @@kernel-families@@
}

}  // namespace dtr::cpu
