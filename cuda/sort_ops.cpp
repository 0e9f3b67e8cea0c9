// The CUDA kernels of sort and topk (cpu/sort.cpp): the lines and k of the
// CPU kernel, then cuda/sort.cu's per-line sort. Emulatable (Note [host
// emulation of CUDA kernels]).
#include "cuda/kernel_util.h"
#include "cuda/sort.h"

namespace dtr::cuda {
namespace {

/// Sorts the lines of input 0 along attrs' dim, writing the first k of each.
void sort_lines(const KernelContext& c, int64_t k, bool descending) {
  const TensorArg& in = c.inputs[0];
  const int64_t dim = c.attrs.i("dim");
  int64_t outer = 1, size = 1, inner = 1;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const int64_t n = in.shape[size_t(d)];
    if (d < dim) outer *= n;
    if (d == dim) size = n;
    if (d > dim) inner *= n;
  }
  if (k == 0 && in.dim() > 0) return;
  // A 0-d input is one line of one element; its 0-d outputs hold it for k = 0 too.
  const int64_t kout = in.dim() == 0 ? 1 : k;
  launch_sort_lines(c.outputs[0].data, c.outputs[1].data, in.data, in.dtype, outer, size, inner, kout, descending,
                    exec_for(c.device));
}

void sort_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const int64_t size = in.dim() == 0 ? 1 : in.shape[size_t(c.attrs.i("dim"))];
  sort_lines(c, size, c.attrs.b("descending"));
}

void topk_kernel(const KernelContext& c) { sort_lines(c, c.attrs.i("k"), c.attrs.b("largest")); }

}  // namespace

void register_sort_kernels() {
  set_cuda_kernel("sort", sort_kernel, /*emulatable=*/true);
  set_cuda_kernel("topk", topk_kernel, /*emulatable=*/true);
}

}  // namespace dtr::cuda
