// Binds the CUDA backend's kernels into the op rows (the backend's
// register_kernels slot, cuda/runtime.cpp). Each line is one file's rows;
// a row without a CUDA kernel raises NotImplementedError naming the op and
// the device when it runs on one (eager/dispatch.cpp).
#include "cuda/runtime.h"

namespace dtr::cuda {

void register_elementwise_kernels();  // cuda/elementwise_ops.cpp
void register_linalg_kernels();       // cuda/linalg_ops.cpp
void register_conv_kernels();         // cuda/conv_ops.cpp
void register_attention_kernels();    // cuda/attention_ops.cpp

void register_kernels() {
  register_elementwise_kernels();
  register_linalg_kernels();
  register_conv_kernels();
  register_attention_kernels();
}

}  // namespace dtr::cuda
