// Kernels of embedding (row gather, deterministic row scatter-add for the
// gradient) and dropout (Philox mask, Note [replay equals original]).
#include <cstring>
#include <vector>

#include "core/philox.h"
#include "cpu/kernels.h"
#include "cpu/linalg.h"

namespace dtr::cpu {
namespace {

// ---- embedding ------------------------------------------------------------------

int64_t index_at(const TensorArg& idx, int64_t i) {
  return idx.dtype == kInt64 ? idx.ptr<int64_t>()[i] : int64_t(idx.ptr<int32_t>()[i]);
}

// Checked serially before any parallel work: a throw must not leave a
// parallel region.
void check_indices(std::string_view op, const TensorArg& idx, int64_t num_weights) {
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = index_at(idx, i);
    DTR_CHECK(v >= 0 && v < num_weights, IndexError,
              "{}: index {} (at position {} of indices of shape {}) is out of range for a weight "
              "with {} rows",
              op, v, i, shape_str(idx.shape), num_weights);
  }
}

// inputs: weight (V, D), indices int32/int64 (*); outputs: out (*, D).
// Rows are copied as bytes, so every weight dtype works.
void embedding_kernel(const KernelContext& c) {
  const TensorArg &w = c.inputs[0], &idx = c.inputs[1], &out = c.outputs[0];
  const int64_t V = w.shape[0], D = w.shape[1];
  check_indices("embedding", idx, V);
  const int64_t row_bytes = D * itemsize(w.dtype);
  parallel_for(idx.numel(), std::max<int64_t>(1, 65536 / std::max<int64_t>(row_bytes, 1)),
               [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(out.data + i * row_bytes, w.data + index_at(idx, i) * row_bytes, size_t(row_bytes));
    }
  });
}

// inputs: grad (*, D), indices (*); outputs: grad_weight (V, D).
// Note [determinism]: indices are bucketed by row with a stable counting
// sort, then each row sums its occurrences in increasing position order —
// one thread per row, no atomics, the same order for any thread count.
template <typename T>
void embedding_backward_floating(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &idx = c.inputs[1], &out = c.outputs[0];
  const int64_t V = out.shape[0], D = out.shape[1], n = idx.numel();
  check_indices("embedding_backward", idx, V);
  std::vector<int64_t> start(size_t(V + 1), 0);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ++start[size_t(index_at(idx, i) + 1)];
  for (int64_t v = 0; v < V; ++v) start[size_t(v + 1)] += start[size_t(v)];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[size_t(fill[size_t(index_at(idx, i))]++)] = i;
  }
  const T* G = g.ptr<T>();
  T* O = out.ptr<T>();
  parallel_for(V, std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)), [&](int64_t v0, int64_t v1) {
    for (int64_t v = v0; v < v1; ++v) {
      T* row = O + v * D;
      std::fill(row, row + D, T(0));
      for (int64_t k = start[size_t(v)]; k < start[size_t(v + 1)]; ++k) {
        const T* src = G + order[size_t(k)] * D;
        for (int64_t d = 0; d < D; ++d) row[d] += src[d];
      }
    }
  });
}

void embedding_backward_kernel(const KernelContext& c) {
  if (has_half_operand(c)) return run_in_float32(c, embedding_backward_kernel);
  float_dispatch(c.inputs[0].dtype, "embedding_backward",
                 [&](auto t) { embedding_backward_floating<decltype(t)>(c); });
}

// ---- dropout ----------------------------------------------------------------------
//
// Element i is kept iff u32_to_uniform(philox_u32(rng, i)) >= p. Like
// PyTorch, the output is x * noise with noise = keep ? 1 / (1 - p) : 0, the
// scale rounded to the tensor's dtype (so NaN/inf inputs stay NaN when
// dropped). The mask is a second, bool output; the backward multiplies by the
// same noise. Replay restores the recorded (seed, offset), so a
// rematerialized output and mask equal the originals bitwise.

// Loads/stores one element of a floating dtype through float (or double).
template <typename S>
struct Elem;
template <>
struct Elem<float> {
  using C = float;
  static C load(float v) { return v; }
  static float store(C v) { return v; }
};
template <>
struct Elem<double> {
  using C = double;
  static C load(double v) { return v; }
  static double store(C v) { return v; }
};
template <>
struct Elem<Half> {
  using C = float;
  static C load(Half v) { return half_to_float(v.bits); }
  static Half store(C v) { return Half{float_to_half(v)}; }
};
template <>
struct Elem<BFloat16> {
  using C = float;
  static C load(BFloat16 v) { return bfloat16_to_float(v.bits); }
  static BFloat16 store(C v) { return BFloat16{float_to_bfloat16(v)}; }
};

template <typename S>
typename Elem<S>::C dropout_scale(double p) {
  using C = typename Elem<S>::C;
  if (p >= 1.0) return C(0);
  // 1 / (1 - p) rounded to the storage dtype, as PyTorch's noise.div_(1 - p).
  return Elem<S>::load(Elem<S>::store(C(1) / C(1.0 - p)));
}

template <typename F>
void floating_storage_dispatch(DType t, std::string_view op, F&& f) {
  switch (t) {
    case kFloat32: return f(float{});
    case kFloat64: return f(double{});
    case kFloat16: return f(Half{});
    case kBFloat16: return f(BFloat16{});
    default:
      throw NotImplementedError(fmt::format("{}: no CPU kernel for dtype {}", op, dtype_name(t)));
  }
}

// inputs: x (*); outputs: y (*), mask bool (*). attrs: p.
void dropout_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &y = c.outputs[0], &mask = c.outputs[1];
  const double p = c.attrs.f("p");
  const RngState rng = c.rng;
  floating_storage_dispatch(x.dtype, "dropout", [&](auto tag) {
    using S = decltype(tag);
    using C = typename Elem<S>::C;
    const C scale = dropout_scale<S>(p);
    const S* X = x.ptr<S>();
    S* Y = y.ptr<S>();
    uint8_t* M = mask.ptr<uint8_t>();
    parallel_for(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      PhiloxStream draw(rng);
      for (int64_t i = b; i < e; ++i) {
        const bool keep = double(u32_to_uniform(draw(uint64_t(i)))) >= p;
        M[i] = keep ? 1 : 0;
        Y[i] = Elem<S>::store(Elem<S>::load(X[i]) * (keep ? scale : C(0)));
      }
    });
  });
}

// inputs: grad_y (*), mask bool (*); outputs: grad_x (*). attrs: p.
void dropout_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &mask = c.inputs[1], &out = c.outputs[0];
  const double p = c.attrs.f("p");
  floating_storage_dispatch(g.dtype, "dropout_backward", [&](auto tag) {
    using S = decltype(tag);
    using C = typename Elem<S>::C;
    const C scale = dropout_scale<S>(p);
    const S* G = g.ptr<S>();
    const uint8_t* M = mask.ptr<uint8_t>();
    S* O = out.ptr<S>();
    parallel_for(g.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) O[i] = Elem<S>::store(Elem<S>::load(G[i]) * (M[i] ? scale : C(0)));
    });
  });
}

}  // namespace

void register_nn_functional_kernels() {
  set_cpu_kernel("embedding", embedding_kernel);
  set_cpu_kernel("embedding_backward", embedding_backward_kernel);
  set_cpu_kernel("dropout", dropout_kernel);
  set_cpu_kernel("dropout_backward", dropout_backward_kernel);
}

}  // namespace dtr::cpu
