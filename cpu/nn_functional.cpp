// Kernels of embedding (row gather, deterministic row scatter-add for the
// gradient), dropout (Philox mask, Note [replay equals original]), one_hot
// and multinomial (Philox draws, sequential per row).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/element.h"

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

// ---- one_hot -------------------------------------------------------------------------

// inputs: indices int64 (*); attrs num_classes → int64 (*, num_classes).
// The indices are checked serially first (IndexError).
void one_hot_kernel(const KernelContext& c) {
  const TensorArg &idx = c.inputs[0], &out = c.outputs[0];
  const int64_t classes = c.attrs.i("num_classes");
  const int64_t n = idx.numel();
  const int64_t* v = idx.ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    DTR_CHECK(v[i] >= 0, IndexError,
              "one_hot: class values must be non-negative, got {} at position {} of indices of shape {}",
              v[i], i, shape_str(idx.shape));
    DTR_CHECK(v[i] < classes, IndexError,
              "one_hot: class values must be smaller than num_classes = {}, got {} at position {} of "
              "indices of shape {}",
              classes, v[i], i, shape_str(idx.shape));
  }
  int64_t* y = out.ptr<int64_t>();
  parallel_for(n, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, classes)), [&](int64_t b, int64_t e) {
    std::fill(y + b * classes, y + e * classes, int64_t{0});
    for (int64_t i = b; i < e; ++i) y[i * classes + v[i]] = 1;
  });
}

// ---- multinomial ------------------------------------------------------------------

/// A uniform double in [0, 1) from two 32-bit draws (53 random bits).
double uniform53(uint32_t hi, uint32_t lo) {
  return double(((uint64_t(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

// inputs: probs (C) or (R, C), contiguous; attrs num_samples, replacement →
// int64 (R, num_samples). Every row is checked first, serially (ValueError).
// Sample s of row r uses the uniform u of draws 2i, 2i+1 (i = r *
// num_samples + s) and picks the first category whose running sum of the
// remaining weights exceeds u * (their total), summed in category order in
// double; without replacement the chosen weight is then set to 0.
void multinomial_kernel(const KernelContext& c) {
  const TensorArg &p = c.inputs[0], &out = c.outputs[0];
  const int64_t categories = p.shape.back();
  const int64_t rows = p.dim() == 2 ? p.shape[0] : 1;
  const int64_t samples = c.attrs.i("num_samples");
  const bool replacement = c.attrs.b("replacement");
  const int64_t psz = itemsize(p.dtype);
  std::vector<double> w(size_t(rows * categories));
  for (int64_t i = 0; i < rows * categories; ++i) w[size_t(i)] = load_as_double(p.data + i * psz, p.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    int64_t nonzero = 0;
    for (int64_t j = 0; j < categories; ++j) {
      const double v = w[size_t(r * categories + j)];
      DTR_CHECK(std::isfinite(v) && v >= 0, ValueError,
                "multinomial: probability tensor contains either inf, nan or element < 0 (value {} "
                "at row {}, category {})",
                v, r, j);
      total += v;
      nonzero += v > 0 ? 1 : 0;
    }
    DTR_CHECK(total > 0, ValueError,
              "multinomial: invalid multinomial distribution (sum of probabilities <= 0) at row {}", r);
    DTR_CHECK(replacement || samples <= nonzero, ValueError,
              "multinomial: invalid multinomial distribution (with replacement=False, not enough "
              "non-zero categories to sample): {} samples, {} non-zero categories at row {}",
              samples, nonzero, r);
  }
  const RngState rng = c.rng;
  int64_t* y = out.ptr<int64_t>();
  parallel_for(rows, 1, [&](int64_t b, int64_t e) {
    PhiloxStream draw(rng);
    for (int64_t r = b; r < e; ++r) {
      std::vector<double> weights(w.begin() + r * categories, w.begin() + (r + 1) * categories);
      std::vector<double> cumulative(static_cast<size_t>(categories));
      int64_t last = 0;  // the last category with a non-zero weight
      double acc = 0;
      for (int64_t j = 0; j < categories; ++j) {
        acc += weights[size_t(j)];
        cumulative[size_t(j)] = acc;
        if (weights[size_t(j)] > 0) last = j;
      }
      for (int64_t s = 0; s < samples; ++s) {
        const uint64_t i = uint64_t(r * samples + s);
        const double u = uniform53(draw(2 * i), draw(2 * i + 1));
        int64_t pick = last;
        if (replacement) {
          const double target = u * cumulative.back();
          const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), target);
          pick = std::min<int64_t>(last, int64_t(it - cumulative.begin()));
        } else {
          double remaining = 0;
          for (double v : weights) remaining += v;
          const double target = u * remaining;
          double run = 0;
          int64_t last_left = 0;
          pick = -1;
          for (int64_t j = 0; j < categories; ++j) {
            if (weights[size_t(j)] <= 0) continue;
            last_left = j;
            run += weights[size_t(j)];
            if (run > target) {
              pick = j;
              break;
            }
          }
          if (pick < 0) pick = last_left;  // u * remaining rounded up to the total
          weights[size_t(pick)] = 0;
        }
        y[r * samples + s] = pick;
      }
    }
  });
}

}  // namespace

void register_nn_functional_kernels() {
  set_cpu_kernel("embedding", embedding_kernel);
  set_cpu_kernel("embedding_backward", embedding_backward_kernel);
  set_cpu_kernel("dropout", dropout_kernel);
  set_cpu_kernel("dropout_backward", dropout_backward_kernel);
  set_cpu_kernel("one_hot", one_hot_kernel);
  set_cpu_kernel("multinomial", multinomial_kernel);
}

}  // namespace dtr::cpu
