// The CUDA kernels of embedding, embedding_backward, dropout,
// dropout_backward, one_hot and multinomial (cpu/nn_functional.cpp): the CPU's argument
// checks, the index checks through an error buffer read back after a
// launch (the CPU's IndexError and message), then the launchers of
// cuda/nn_functional.cu. All are emulatable (Note [host emulation of CUDA
// kernels]).
#include "core/half.h"
#include "cuda/index.h"
#include "cuda/index_ops.h"
#include "cuda/kernel_util.h"

namespace dtr::cuda {
namespace {

/// IndexError as cpu/nn_functional.cpp's check_indices.
void check_embedding_indices(std::string_view op, const TensorArg& idx, int64_t num_weights, const Exec& e) {
  const BadIndex bad = check_index_range(idx.data, idx.dtype, idx.numel(), 0, num_weights, e);
  DTR_CHECK(bad.position < 0, IndexError,
            "{}: index {} (at position {} of indices of shape {}) is out of range for a weight with {} rows", op,
            bad.value, bad.position, shape_str(idx.shape), num_weights);
}

void embedding_kernel(const KernelContext& c) {
  const TensorArg &w = c.inputs[0], &idx = c.inputs[1], &out = c.outputs[0];
  const Exec e = exec_for(c.device);
  check_embedding_indices("embedding", idx, w.shape[0], e);
  launch_embedding(out.data, w.data, itemsize(w.dtype), idx.data, idx.dtype, idx.numel(), w.shape[1], e);
}

void embedding_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &idx = c.inputs[1], &out = c.outputs[0];
  const Exec e = exec_for(c.device);
  check_embedding_indices("embedding_backward", idx, out.shape[0], e);
  DTR_CHECK(is_floating(out.dtype), NotImplementedError, "embedding_backward: no CUDA kernel for dtype {}",
            dtype_name(out.dtype));
  // float16/bfloat16 accumulate in float32 and round once, as the CPU's run_in_float32.
  launch_embedding_backward(out.data, out.dtype, g.data, idx.data, idx.dtype, idx.numel(), out.shape[0], out.shape[1],
                            e);
}

/// 1 / (1 - p) rounded to the storage dtype (cpu/nn_functional.cpp's dropout_scale).
double dropout_scale(double p, DType dt, std::string_view op) {
  DTR_CHECK(is_floating(dt), NotImplementedError, "{}: no CUDA kernel for dtype {}", op, dtype_name(dt));
  if (p >= 1.0) return 0;
  switch (dt) {
    case kFloat64: return 1.0 / (1.0 - p);
    case kFloat16: return half_to_float(float_to_half(1.0f / float(1.0 - p)));
    case kBFloat16: return bfloat16_to_float(float_to_bfloat16(1.0f / float(1.0 - p)));
    default: return 1.0f / float(1.0 - p);
  }
}

void dropout_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &y = c.outputs[0], &mask = c.outputs[1];
  const double p = c.attrs.f("p");
  launch_dropout(y.data, mask.data, x.data, x.dtype, x.numel(), p, dropout_scale(p, x.dtype, "dropout"), c.rng,
                 exec_for(c.device));
}

void dropout_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &mask = c.inputs[1], &out = c.outputs[0];
  const double p = c.attrs.f("p");
  launch_dropout_backward(out.data, g.data, mask.data, g.dtype, g.numel(),
                          dropout_scale(p, g.dtype, "dropout_backward"), exec_for(c.device));
}

void one_hot_kernel(const KernelContext& c) {
  const TensorArg &idx = c.inputs[0], &out = c.outputs[0];
  const int64_t classes = c.attrs.i("num_classes");
  const Exec e = exec_for(c.device);
  const BadIndex bad = check_index_range(idx.data, idx.dtype, idx.numel(), 0, classes, e);
  if (bad.position >= 0) {
    DTR_CHECK(bad.value >= 0, IndexError,
              "one_hot: class values must be non-negative, got {} at position {} of indices of shape {}", bad.value,
              bad.position, shape_str(idx.shape));
    throw IndexError(fmt::format(
        "one_hot: class values must be smaller than num_classes = {}, got {} at position {} of indices of shape {}",
        classes, bad.value, bad.position, shape_str(idx.shape)));
  }
  launch_one_hot(out.data, idx.data, idx.numel(), classes, e);
}

void multinomial_kernel(const KernelContext& c) {
  const TensorArg &p = c.inputs[0], &out = c.outputs[0];
  const int64_t categories = p.shape.back();
  const int64_t rows = p.dim() == 2 ? p.shape[0] : 1;
  const int64_t samples = c.attrs.i("num_samples");
  const bool replacement = c.attrs.b("replacement");
  const Exec e = exec_for(c.device);
  const BadRow bad = check_multinomial_rows(p.data, p.dtype, rows, categories, samples, replacement, e);
  if (bad.row < 0) {
    launch_multinomial(out.data, p.data, p.dtype, rows, categories, samples, replacement, c.rng, e);
    return;
  }
  DTR_CHECK(bad.kind != 1, ValueError,
            "multinomial: probability tensor contains either inf, nan or element < 0 (value {} at row {}, "
            "category {})",
            bad.value, bad.row, bad.category);
  DTR_CHECK(bad.kind != 2, ValueError,
            "multinomial: invalid multinomial distribution (sum of probabilities <= 0) at row {}", bad.row);
  DTR_CHECK(bad.kind != 3, ValueError,
            "multinomial: invalid multinomial distribution (with replacement=False, not enough non-zero "
            "categories to sample): {} samples, {} non-zero categories at row {}",
            samples, bad.count, bad.row);
}

}  // namespace

void register_nn_functional_kernels() {
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("embedding", embedding_kernel);
  bind("embedding_backward", embedding_backward_kernel);
  bind("dropout", dropout_kernel);
  bind("dropout_backward", dropout_backward_kernel);
  bind("one_hot", one_hot_kernel);
  bind("multinomial", multinomial_kernel);
}

}  // namespace dtr::cuda
