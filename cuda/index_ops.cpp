// The CUDA kernels of the index family (cpu/index.cpp) and of the view
// family's gradient scatters (slice_backward, select_backward): the CPU
// kernels' argument checks on the host, index range checks through an
// error buffer read back after a launch (a kernel cannot throw; same
// IndexError and message as the CPU), then the launchers of cuda/index.cu.
// All are emulatable (Note [host emulation of CUDA kernels]).
#include <algorithm>
#include <cstring>

#include "core/element.h"
#include "cuda/index.h"
#include "cuda/index_ops.h"
#include "cuda/kernel_util.h"

namespace dtr::cuda {

Dims dims_of(IntList shape, IntList strides, std::string_view op) {
  DTR_CHECK(shape.size() <= size_t(kMaxIndexDims), NotImplementedError,
            "{}: {} dims; the CUDA indexing kernels take at most {}", op, shape.size(), kMaxIndexDims);
  Dims d;
  d.ndim = int(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) {
    d.size[k] = shape[k];
    d.stride[k] = strides[k];
  }
  return d;
}

Dims contiguous_dims(IntList shape, std::string_view op) { return dims_of(shape, contiguous_strides(shape), op); }

void check_indices_on_device(std::string_view op, const TensorArg& index, int64_t dim, int64_t size,
                             const Exec& e) {
  const BadIndex bad = check_index_range(index.data, index.dtype, index.numel(), 0, size, e);
  DTR_CHECK(bad.position < 0, IndexError, "{}: index {} is out of bounds for dimension {} with size {}", op,
            bad.value, dim, size);
}

uint64_t fill_bits(const Attrs& attrs, DType dt) {
  std::byte value[8] = {};
  if (attrs.has("int_value") && !is_floating(dt)) {
    store_from_int(value, dt, attrs.i("int_value"));
  } else {
    store_from_double(value, dt, attrs.f("value"));
  }
  uint64_t bits = 0;
  std::memcpy(&bits, value, sizeof bits);
  return bits;
}

namespace {

int64_t product(IntList shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= shape[d];
  return p;
}

/// NotImplementedError unless `dt` is floating (cpu/index.cpp's scatter_add_dispatch).
void check_scatter_dtype(std::string_view op, DType dt) {
  DTR_CHECK(is_floating(dt), NotImplementedError, "{}: no CUDA kernel for dtype {}", op, dtype_name(dt));
}

// ---- cat ----------------------------------------------------------------------------

void cat_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), out.dim(), "cat");
  const int64_t outer = product(out.shape, 0, size_t(dim));
  const int64_t inner = product(out.shape, size_t(dim) + 1, out.shape.size());
  const int64_t out_row = out.shape[size_t(dim)] * inner;
  const Exec e = exec_for(c.device);
  int64_t offset = 0;
  for (const TensorArg& in : c.inputs) {
    if (in.numel() == 0) continue;  // empty inputs (incl. legacy [0]) add nothing
    const int64_t row = in.shape[size_t(dim)] * inner;
    launch_cat_piece(out.data, out.dtype, in.data, in.dtype, outer, row, out_row, offset, e);
    offset += row;
  }
}

// ---- index_select ---------------------------------------------------------------------

struct Split3 {
  int64_t outer = 1, size = 1, inner = 1;
};
Split3 split3(IntList shape, int64_t dim) {
  if (shape.empty()) return {};
  return {product(shape, 0, size_t(dim)), shape[size_t(dim)], product(shape, size_t(dim) + 1, shape.size())};
}

void index_select_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &index = c.inputs[1], &out = c.outputs[0];
  const int64_t dim = x.dim() == 0 ? 0 : normalize_dim(c.attrs.i("dim"), x.dim(), "index_select");
  const Split3 s = split3(x.shape, dim);
  const Exec e = exec_for(c.device);
  check_indices_on_device("index_select", index, dim, s.size, e);
  launch_index_select(out.data, x.data, itemsize(x.dtype), index.data, index.dtype, s.outer, s.size, s.inner,
                      index.numel(), e);
}

void index_select_backward_kernel(const KernelContext& c) {
  const TensorArg &grad = c.inputs[0], &index = c.inputs[1], &out = c.outputs[0];
  const int64_t dim = out.dim() == 0 ? 0 : normalize_dim(c.attrs.i("dim"), out.dim(), "index_select_backward");
  const Split3 s = split3(out.shape, dim);
  const Exec e = exec_for(c.device);
  check_indices_on_device("index_select_backward", index, dim, s.size, e);
  check_scatter_dtype("index_select_backward", out.dtype);
  launch_index_select_backward(out.data, out.dtype, grad.data, index.data, index.dtype, s.outer, s.size, s.inner,
                               index.numel(), e);
}

// ---- gather ---------------------------------------------------------------------------

void gather_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &index = c.inputs[1], &out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), x.dim(), "gather");
  const Exec e = exec_for(c.device);
  check_indices_on_device("gather", index, dim, x.dim() == 0 ? 1 : x.shape[size_t(dim)], e);
  launch_gather(out.data, x.data, itemsize(x.dtype), index.data, index.dtype, contiguous_dims(index.shape, "gather"),
                contiguous_dims(x.shape, "gather"), int(dim), e);
}

void gather_backward_kernel(const KernelContext& c) {
  const TensorArg &grad = c.inputs[0], &index = c.inputs[1], &out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), out.dim(), "gather_backward");
  const Exec e = exec_for(c.device);
  check_indices_on_device("gather_backward", index, dim, out.dim() == 0 ? 1 : out.shape[size_t(dim)], e);
  check_scatter_dtype("gather_backward", out.dtype);
  launch_gather_backward(out.data, out.dtype, grad.data, index.data, index.dtype,
                         contiguous_dims(out.shape, "gather_backward"), contiguous_dims(index.shape, "gather_backward"),
                         int(dim), e);
}

// ---- scatter_add, index_add ------------------------------------------------------------

Alpha alpha_of(const Attrs& a) {
  Alpha r;
  if (a.has("int_alpha")) {
    r.use_int = true;
    r.i = a.i("int_alpha");
    r.f = double(r.i);
  } else if (a.has("alpha")) {
    r.f = a.f("alpha");
  }
  return r;
}

/// NotImplementedError for uint8 (cpu/index.cpp's accumulate_rows).
void check_accumulate_dtype(std::string_view op, DType dt) {
  DTR_CHECK(dt != kUInt8, NotImplementedError, "{}: no CUDA kernel for dtype {}", op, dtype_name(dt));
}

void scatter_add_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &index = c.inputs[1], &src = c.inputs[2], &out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), out.dim(), "scatter_add");
  const Exec e = exec_for(c.device);
  check_indices_on_device("scatter_add", index, dim, out.dim() == 0 ? 1 : out.shape[size_t(dim)], e);
  check_accumulate_dtype("scatter_add", out.dtype);
  // An empty index adds nothing: out is x.
  const bool none = index.numel() == 0;
  launch_scatter_add(out.data, out.dtype, dims_of(out.shape, out.strides, "scatter_add"), x.data,
                     dims_of(out.shape, x.strides, "scatter_add"), index.data, index.dtype,
                     contiguous_dims(none ? Shape(size_t(out.dim()), 0) : index.shape, "scatter_add"), src.data,
                     contiguous_dims(src.shape, "scatter_add"), int(dim), alpha_of(c.attrs), false, e);
}

void index_add_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &index = c.inputs[1], &source = c.inputs[2], &out = c.outputs[0];
  const int64_t dim = out.dim() == 0 ? 0 : normalize_dim(c.attrs.i("dim"), out.dim(), "index_add");
  const Exec e = exec_for(c.device);
  check_indices_on_device("index_add", index, dim, out.dim() == 0 ? 1 : out.shape[size_t(dim)], e);
  check_accumulate_dtype("index_add", out.dtype);
  const Shape index_1d{index.numel()};
  launch_scatter_add(out.data, out.dtype, dims_of(out.shape, out.strides, "index_add"), x.data,
                     dims_of(out.shape, x.strides, "index_add"), index.data, index.dtype,
                     contiguous_dims(index_1d, "index_add"), source.data, contiguous_dims(source.shape, "index_add"),
                     int(dim), alpha_of(c.attrs), true, e);
}

// ---- flip, masked_fill, tril/triu --------------------------------------------------------

void flip_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &out = c.outputs[0];
  Strides strides = contiguous_strides(x.shape);
  int64_t base = 0;
  for (int64_t d : c.attrs.ints("dims")) {
    const size_t k = size_t(normalize_dim(d, x.dim(), "flip"));
    if (x.dim() == 0 || x.shape[k] == 0) continue;
    base += (x.shape[k] - 1) * strides[k];
    strides[k] = -strides[k];
  }
  const int64_t isz = itemsize(x.dtype);
  launch_flip(out.data, x.data + base * isz, isz, dims_of(x.shape, strides, "flip"), exec_for(c.device));
}

void masked_fill_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &mask = c.inputs[1], &out = c.outputs[0];
  launch_masked_fill(layout_of<3>(out, {&x, &mask}, "masked_fill"), fill_bits(c.attrs, out.dtype),
                     itemsize(out.dtype), exec_for(c.device));
}

template <bool kLower>
void triangle_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &out = c.outputs[0];
  const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  if (rows == 0 || cols == 0) return;
  const int64_t diagonal = std::clamp<int64_t>(c.attrs.i("diagonal"), -rows - 1, cols + 1);
  launch_triangle(out.data, x.data, itemsize(x.dtype), x.numel(), rows, cols, diagonal, kLower, exec_for(c.device));
}

// ---- slice_backward, select_backward ----------------------------------------------------

void slice_backward_kernel(const KernelContext& c) {
  const TensorArg &grad = c.inputs[0], &out = c.outputs[0];
  const int64_t dim = c.attrs.i("dim"), start = c.attrs.i("start"), step = c.attrs.i("step");
  launch_slice_backward(out.data, dims_of(out.shape, out.strides, "slice_backward"), grad.data,
                        dims_of(grad.shape, grad.strides, "slice_backward"), itemsize(out.dtype), int(dim), start, step,
                        exec_for(c.device));
}

void select_backward_kernel(const KernelContext& c) {
  const TensorArg &grad = c.inputs[0], &out = c.outputs[0];
  const int64_t dim = c.attrs.i("dim"), index = c.attrs.i("index");
  launch_select_backward(out.data, dims_of(out.shape, out.strides, "select_backward"), grad.data,
                         dims_of(grad.shape, grad.strides, "select_backward"), itemsize(out.dtype), int(dim), index,
                         exec_for(c.device));
}

}  // namespace

void register_index_kernels() {
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("cat", cat_kernel);
  bind("index_select", index_select_kernel);
  bind("index_select_backward", index_select_backward_kernel);
  bind("gather", gather_kernel);
  bind("gather_backward", gather_backward_kernel);
  bind("masked_fill", masked_fill_kernel);
  bind("masked_fill_", masked_fill_kernel);
  bind("flip", flip_kernel);
  bind("scatter_add", scatter_add_kernel);
  bind("scatter_add_", scatter_add_kernel);
  bind("index_add", index_add_kernel);
  bind("index_add_", index_add_kernel);
  bind("tril", triangle_kernel<true>);
  bind("triu", triangle_kernel<false>);
  bind("slice_backward", slice_backward_kernel);
  bind("select_backward", select_backward_kernel);
}

}  // namespace dtr::cuda
