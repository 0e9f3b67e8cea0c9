// Binds the CUDA backend's kernels into the op rows (the backend's
// register_kernels slot, cuda/runtime.cpp). Each line is one file's rows;
// a row without a CUDA kernel raises NotImplementedError naming the op and
// the device when it runs on one (eager/dispatch.cpp).
#include "cuda/runtime.h"

namespace dtr::cuda {

void register_elementwise_kernels();  // cuda/elementwise_ops.cpp
void register_index_kernels();        // cuda/index_ops.cpp
void register_nn_functional_kernels();  // cuda/nn_functional_ops.cpp
void register_resample_kernels();     // cuda/resample_ops.cpp
void register_sort_kernels();         // cuda/sort_ops.cpp
void register_linalg_kernels();       // cuda/linalg_ops.cpp
void register_conv_kernels();         // cuda/conv_ops.cpp
void register_attention_kernels();    // cuda/attention_ops.cpp
void register_norm_kernels();         // cuda/norm_ops.cpp
void register_reduce_kernels();       // cuda/reduce_ops.cpp
void register_loss_kernels();         // cuda/loss_ops.cpp

void register_kernels() {
  register_elementwise_kernels();
  register_index_kernels();
  register_nn_functional_kernels();
  register_resample_kernels();
  register_sort_kernels();
  register_linalg_kernels();
  register_conv_kernels();
  register_attention_kernels();
  register_norm_kernels();
  register_reduce_kernels();
  register_loss_kernels();
}

}  // namespace dtr::cuda
