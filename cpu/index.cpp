// Joining and indexing kernels: cat, index_select (+ backward), gather (+
// backward), masked_fill / masked_fill_, tril, triu, flip, scatter_add /
// scatter_add_, index_add / index_add_, and the gradient scatters of the view
// family, slice_backward and select_backward.
//
// Data movement works on any dtype (bytes are copied). The backward scatters
// accumulate float32/float64 natively and float16/bfloat16 in float32, each
// output element summed in a fixed order (index position ascending) by
// exactly one thread: no atomics (Note [determinism]).
#include <array>
#include <cstring>
#include <vector>

#include "cpu/accumulate.h"
#include "cpu/elementwise.h"

namespace dtr::cpu {
namespace {

// ---- helpers ----------------------------------------------------------------------

/// Like for_each_offset, with N stride sets: f(i, offsets) where offsets[k]
/// is element i's offset under strides[k] (row-major order over `shape`).
template <size_t N, typename F>
void for_each_offsets(IntList shape, const std::array<Strides, N>& strides, int64_t begin,
                      int64_t end, F&& f) {
  const int64_t nd = int64_t(shape.size());
  std::array<int64_t, N> off{};
  if (nd == 0) {
    if (begin < end) f(int64_t{0}, off);
    return;
  }
  int64_t idx[16] = {0};
  int64_t rem = begin;
  for (int64_t d = nd - 1; d >= 0; --d) {
    const int64_t s = shape[size_t(d)];
    idx[d] = s == 0 ? 0 : rem % s;
    rem = s == 0 ? 0 : rem / s;
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * strides[k][size_t(d)];
  }
  for (int64_t i = begin; i < end; ++i) {
    f(i, off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][size_t(d)];
      if (++idx[d] < shape[size_t(d)]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= idx[d] * strides[k][size_t(d)];
      idx[d] = 0;
    }
  }
}

/// Copies `n` elements of `isz` bytes.
inline void copy_elements(std::byte* dst, const std::byte* src, int64_t n, int64_t isz) {
  if (n == 1) {
    switch (isz) {
      case 8: std::memcpy(dst, src, 8); return;
      case 4: std::memcpy(dst, src, 4); return;
      case 2: std::memcpy(dst, src, 2); return;
      default: *dst = *src; return;
    }
  }
  std::memcpy(dst, src, size_t(n * isz));
}

int64_t product(IntList shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= shape[d];
  return p;
}

Shape without(IntList shape, int64_t dim) {
  Shape s(shape.begin(), shape.end());
  s.erase(s.begin() + dim);
  return s;
}

/// The index values as int64 (int64 or int32 storage, contiguous).
std::vector<int64_t> load_indices(const TensorArg& index) {
  std::vector<int64_t> v(size_t(index.numel()));
  if (v.empty()) return v;
  if (index.dtype == kInt64) {
    std::memcpy(v.data(), index.data, v.size() * sizeof(int64_t));
  } else {
    const int32_t* p = index.ptr<int32_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  }
  return v;
}

/// Throws IndexError (before any parallel work) unless every index is in [0, size).
void check_indices(std::string_view op, const std::vector<int64_t>& idx, int64_t dim, int64_t size) {
  for (int64_t v : idx) {
    DTR_CHECK(v >= 0 && v < size, IndexError,
              "{}: index {} is out of bounds for dimension {} with size {}", op, v, dim, size);
  }
}

/// Runs `scatter(T* out, const T* grad)` for a scatter-add backward: natively
/// for float32/float64, in a float32 scratch for float16/bfloat16. `out` is
/// zero-filled first.
template <typename F>
void scatter_add_dispatch(std::string_view op, const TensorArg& grad, const TensorArg& out,
                          F&& scatter) {
  const int64_t n_out = out.numel();
  switch (out.dtype) {
    case kFloat32:
      std::fill_n(out.ptr<float>(), n_out, 0.0f);
      scatter(out.ptr<float>(), grad.ptr<float>());
      return;
    case kFloat64:
      std::fill_n(out.ptr<double>(), n_out, 0.0);
      scatter(out.ptr<double>(), grad.ptr<double>());
      return;
    case kFloat16:
    case kBFloat16: {
      const int64_t n_grad = grad.numel();
      std::vector<float> g(static_cast<size_t>(n_grad));
      std::vector<float> acc(static_cast<size_t>(n_out), 0.0f);
      for (int64_t i = 0; i < n_grad; ++i) {
        g[size_t(i)] = float(load_as_double(grad.data + 2 * i, grad.dtype));
      }
      scatter(acc.data(), static_cast<const float*>(g.data()));
      for (int64_t i = 0; i < n_out; ++i) store_from_double(out.data + 2 * i, out.dtype, acc[size_t(i)]);
      return;
    }
    default:
      throw NotImplementedError(
          fmt::format("{}: no CPU kernel for dtype {}", op, dtype_name(out.dtype)));
  }
}

// ---- cat ------------------------------------------------------------------------------

void cat_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), out.dim(), "cat");
  const int64_t outer = product(out.shape, 0, size_t(dim));
  const int64_t inner = product(out.shape, size_t(dim) + 1, out.shape.size());
  const int64_t out_row = out.shape[size_t(dim)] * inner;
  const int64_t osz = itemsize(out.dtype);
  struct Piece {
    const TensorArg* in;
    int64_t row;     // elements per outer index
    int64_t offset;  // element offset within an output row
  };
  std::vector<Piece> pieces;
  int64_t offset = 0;
  for (const TensorArg& in : c.inputs) {
    if (in.numel() == 0) continue;  // empty inputs (incl. legacy [0]) add nothing
    const int64_t row = in.shape[size_t(dim)] * inner;
    pieces.push_back({&in, row, offset});
    offset += row;
  }
  if (pieces.empty() || outer == 0) return;
  const int64_t np = int64_t(pieces.size());
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, offset / np));
  parallel_for(outer * np, grain, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t o = q / np;
      const Piece& p = pieces[size_t(q % np)];
      std::byte* dst = out.data + (o * out_row + p.offset) * osz;
      const int64_t isz = itemsize(p.in->dtype);
      const std::byte* src = p.in->data + o * p.row * isz;
      if (p.in->dtype == out.dtype) {
        std::memcpy(dst, src, size_t(p.row * osz));
      } else {
        for (int64_t i = 0; i < p.row; ++i) convert_element(dst + i * osz, out.dtype, src + i * isz, p.in->dtype);
      }
    }
  });
}

// ---- index_select ---------------------------------------------------------------------

/// [outer, size, inner] around `dim`; a 0-d shape counts as [1].
struct Split3 {
  int64_t outer = 1, size = 1, inner = 1;
};
Split3 split3(IntList shape, int64_t dim) {
  if (shape.empty()) return {};
  return {product(shape, 0, size_t(dim)), shape[size_t(dim)],
          product(shape, size_t(dim) + 1, shape.size())};
}

void index_select_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = x.dim() == 0 ? 0 : normalize_dim(c.attrs.i("dim"), x.dim(), "index_select");
  const Split3 s = split3(x.shape, dim);
  const std::vector<int64_t> idx = load_indices(c.inputs[1]);
  check_indices("index_select", idx, dim, s.size);
  const int64_t n = int64_t(idx.size()), isz = itemsize(x.dtype);
  parallel_for(s.outer * n, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(s.inner, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t q = b; q < e; ++q) {
                   const int64_t o = q / n, j = q % n;
                   copy_elements(out.data + q * s.inner * isz,
                                 x.data + (o * s.size + idx[size_t(j)]) * s.inner * isz, s.inner, isz);
                 }
               });
}

// grad (outer, n, inner) → out (outer, size, inner): out[o, idx[j], i] += grad[o, j, i],
// parallel over (o, i); each thread loops j = 0..n-1 in order.
void index_select_backward_kernel(const KernelContext& c) {
  const TensorArg& grad = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = out.dim() == 0 ? 0 : normalize_dim(c.attrs.i("dim"), out.dim(), "index_select_backward");
  const Split3 s = split3(out.shape, dim);
  const std::vector<int64_t> idx = load_indices(c.inputs[1]);
  check_indices("index_select_backward", idx, dim, s.size);
  const int64_t n = int64_t(idx.size());
  scatter_add_dispatch("index_select_backward", grad, out, [&](auto* o_ptr, const auto* g_ptr) {
    parallel_for(s.outer * s.inner, 1 << 12, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e;) {
        const int64_t o = p / s.inner, i0 = p % s.inner;
        const int64_t i1 = std::min(s.inner, i0 + (e - p));
        for (int64_t j = 0; j < n; ++j) {
          const auto* src = g_ptr + (o * n + j) * s.inner;
          auto* dst = o_ptr + (o * s.size + idx[size_t(j)]) * s.inner;
          for (int64_t i = i0; i < i1; ++i) dst[i] += src[i];
        }
        p += i1 - i0;
      }
    });
  });
}

// ---- gather -----------------------------------------------------------------------------

/// The loop structure shared by gather and its backward: for every position
/// of the index outside `dim` (parallel), f(x_offset, index_offset) gives the
/// offsets of the x row and index row; the caller walks `dim` itself.
struct GatherGeometry {
  Shape rows;                    // index shape without dim
  std::array<Strides, 2> strides;  // x's and index's contiguous strides without dim
  int64_t n = 1;                 // index size along dim
  int64_t size = 1;              // x size along dim
  int64_t x_stride = 1, index_stride = 1;
};

GatherGeometry gather_geometry(IntList x_shape, IntList index_shape, int64_t dim) {
  GatherGeometry g;
  if (x_shape.empty()) return g;  // 0-d counts as [1]
  const Strides xs = contiguous_strides(x_shape), is = contiguous_strides(index_shape);
  g.rows = without(index_shape, dim);
  g.strides = {without(xs, dim), without(is, dim)};
  g.n = index_shape[size_t(dim)];
  g.size = x_shape[size_t(dim)];
  g.x_stride = xs[size_t(dim)];
  g.index_stride = is[size_t(dim)];
  return g;
}

void gather_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& index = c.inputs[1];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), x.dim(), "gather");
  const GatherGeometry g = gather_geometry(x.shape, index.shape, dim);
  const std::vector<int64_t> idx = load_indices(index);
  check_indices("gather", idx, dim, g.size);
  const int64_t isz = itemsize(x.dtype);
  parallel_for(numel(g.rows), std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(g.n, 1)),
               [&](int64_t b, int64_t e) {
                 for_each_offsets<2>(g.rows, g.strides, b, e, [&](int64_t, const auto& off) {
                   for (int64_t j = 0; j < g.n; ++j) {
                     const int64_t io = off[1] + j * g.index_stride;
                     copy_elements(out.data + io * isz,
                                   x.data + (off[0] + idx[size_t(io)] * g.x_stride) * isz, 1, isz);
                   }
                 });
               });
}

// out (input shape) = 0; out[.., idx[.., j, ..], ..] += grad[.., j, ..], parallel over the
// positions outside dim (disjoint output rows), j ascending within each.
void gather_backward_kernel(const KernelContext& c) {
  const TensorArg& grad = c.inputs[0];
  const TensorArg& index = c.inputs[1];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), out.dim(), "gather_backward");
  const GatherGeometry g = gather_geometry(out.shape, index.shape, dim);
  const std::vector<int64_t> idx = load_indices(index);
  check_indices("gather_backward", idx, dim, g.size);
  scatter_add_dispatch("gather_backward", grad, out, [&](auto* o_ptr, const auto* g_ptr) {
    parallel_for(numel(g.rows), std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(g.n, 1)),
                 [&](int64_t b, int64_t e) {
                   for_each_offsets<2>(g.rows, g.strides, b, e, [&](int64_t, const auto& off) {
                     for (int64_t j = 0; j < g.n; ++j) {
                       const int64_t io = off[1] + j * g.index_stride;
                       o_ptr[off[0] + idx[size_t(io)] * g.x_stride] += g_ptr[io];
                     }
                   });
                 });
  });
}

// ---- scatter_add, index_add ----------------------------------------------------------------

/// out starts as x: copied unless out is x (the in-place rows), both contiguous then.
void start_from_input(const TensorArg& x, const TensorArg& out) {
  if (x.data != out.data) std::memcpy(out.data, x.data, size_t(out.numel() * itemsize(out.dtype)));
}

/// Loop geometry of an accumulation into `out` (any strides) along `dim`: the
/// positions outside dim (rows of `shape`, the added tensor's positions
/// outside dim), each with its element offset in out, index and src; the
/// caller walks dim.
struct ScatterGeometry {
  Shape rows;
  std::array<Strides, 3> strides;  // out's, index's, src's, without dim
  int64_t n = 1;                   // entries along dim
  int64_t out_stride = 0, index_stride = 0, src_stride = 0;
};

/// index_shape empty: one index per position along dim (index_add).
ScatterGeometry scatter_geometry(const TensorArg& out, IntList index_shape, IntList src_shape,
                                 IntList walk_shape, int64_t dim) {
  ScatterGeometry g;
  if (out.dim() == 0) return g;  // 0-d counts as [1]
  const Strides is = contiguous_strides(index_shape), ss = contiguous_strides(src_shape);
  g.rows = without(walk_shape, dim);
  g.strides = {without(out.strides, dim), index_shape.empty() ? Strides(g.rows.size(), 0) : without(is, dim),
               without(ss, dim)};
  g.n = walk_shape[size_t(dim)];
  g.out_stride = out.strides[size_t(dim)];
  g.index_stride = index_shape.empty() ? 1 : is[size_t(dim)];
  g.src_stride = ss[size_t(dim)];
  return g;
}

/// out[row, idx[.. j ..]] += alpha * src[row, j] for every row (parallel:
/// rows own disjoint output elements) and j ascending within each row. Sums
/// run in S's compute type (float for float16/bfloat16, rounded once per
/// addition, as PyTorch's CPU kernels), integers in int64 (int32 wraps like
/// its own addition).
template <typename S>
void accumulate_rows_typed(const ScatterGeometry& g, const TensorArg& out, const TensorArg& src,
                           const std::vector<int64_t>& idx, const Attrs& attrs) {
  using C = std::conditional_t<std::is_integral_v<S>, int64_t, compute_t<S>>;
  C alpha = C(1);
  if (attrs.has("int_alpha")) {
    alpha = C(attrs.i("int_alpha"));
  } else if (attrs.has("alpha")) {
    alpha = C(attrs.f("alpha"));
  }
  S* o = reinterpret_cast<S*>(out.data);
  const S* s = reinterpret_cast<const S*>(src.data);
  parallel_for(numel(g.rows), std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(g.n, 1)),
               [&](int64_t b, int64_t e) {
                 for_each_offsets<3>(g.rows, g.strides, b, e, [&](int64_t, const auto& off) {
                   for (int64_t j = 0; j < g.n; ++j) {
                     S& dst = o[off[0] + idx[size_t(off[1] + j * g.index_stride)] * g.out_stride];
                     const C v = C(to_compute(s[off[2] + j * g.src_stride]));
                     dst = from_compute<S>(C(to_compute(dst)) + (alpha == C(1) ? v : C(alpha * v)));
                   }
                 });
               });
}

/// accumulate_rows_typed for out's dtype; NotImplementedError naming `op` for bool and uint8.
void accumulate_rows(std::string_view op, const ScatterGeometry& g, const TensorArg& out,
                     const TensorArg& src, const std::vector<int64_t>& idx, const Attrs& attrs) {
  all_dispatch(out.dtype, [&](auto t) {
    using S = decltype(t);
    if constexpr (std::is_same_v<S, uint8_t>) {
      throw NotImplementedError(fmt::format("{}: no CPU kernel for dtype {}", op, dtype_name(out.dtype)));
    } else {
      accumulate_rows_typed<S>(g, out, src, idx, attrs);
    }
  });
}

// out = x; out[.., index[.., j, ..], ..] += src[.., j, ..] over index's shape.
void scatter_add_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& index = c.inputs[1];
  const TensorArg& src = c.inputs[2];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = normalize_dim(c.attrs.i("dim"), out.dim(), "scatter_add");
  const std::vector<int64_t> idx = load_indices(index);
  check_indices("scatter_add", idx, dim, out.dim() == 0 ? 1 : out.shape[size_t(dim)]);
  start_from_input(x, out);
  if (idx.empty()) return;
  accumulate_rows("scatter_add", scatter_geometry(out, index.shape, src.shape, index.shape, dim), out,
                  src, idx, c.attrs);
}

// out = x; out[.., index[j], ..] += alpha * source[.., j, ..].
void index_add_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& source = c.inputs[2];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = out.dim() == 0 ? 0 : normalize_dim(c.attrs.i("dim"), out.dim(), "index_add");
  const std::vector<int64_t> idx = load_indices(c.inputs[1]);
  check_indices("index_add", idx, dim, out.dim() == 0 ? 1 : out.shape[size_t(dim)]);
  start_from_input(x, out);
  if (idx.empty()) return;
  accumulate_rows("index_add", scatter_geometry(out, {}, source.shape, source.shape, dim), out, source,
                  idx, c.attrs);
}

// ---- flip -----------------------------------------------------------------------------------

// out[i] = x[i with the index along each flipped dim d mirrored: size_d - 1 - i_d].
void flip_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const int64_t isz = itemsize(x.dtype);
  Strides strides = contiguous_strides(x.shape);
  int64_t base = 0;
  for (int64_t d : c.attrs.ints("dims")) {
    const size_t k = size_t(normalize_dim(d, x.dim(), "flip"));
    if (x.dim() == 0 || x.shape[k] == 0) continue;
    base += (x.shape[k] - 1) * strides[k];
    strides[k] = -strides[k];
  }
  const std::byte* src = x.data + base * isz;
  parallel_for(out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for_each_offset(out.shape, strides, b, e, [&](int64_t i, int64_t off) {
      copy_elements(out.data + i * isz, src + off * isz, 1, isz);
    });
  });
}

// ---- masked_fill ------------------------------------------------------------------------

// out = mask ? value : x, with x and mask broadcast to out's shape. For
// masked_fill_ out is x itself (any strides).
void masked_fill_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& mask = c.inputs[1];
  const TensorArg& out = c.outputs[0];
  const int64_t isz = itemsize(out.dtype);
  std::byte value[8];
  if (c.attrs.has("int_value") && !is_floating(out.dtype)) {
    store_from_int(value, out.dtype, c.attrs.i("int_value"));
  } else {
    store_from_double(value, out.dtype, c.attrs.f("value"));
  }
  const auto* m = reinterpret_cast<const uint8_t*>(mask.data);
  const Strides ms = broadcast_strides(mask.shape, mask.strides, out.shape);
  const int64_t n = out.numel();
  const bool same_layout = out.is_contiguous() && x.is_contiguous() && x.numel() == n;
  if (same_layout && out.dtype == kFloat32) {
    // The training path: float32, any (broadcast) mask, e.g. a causal [T, T] mask on [B, H, T, T].
    float v;
    std::memcpy(&v, value, 4);
    const float* xp = x.ptr<float>();
    float* op = out.ptr<float>();
    // A contiguous mask whose shape (leading 1s dropped) is a suffix of out's
    // shape repeats every mask.numel() elements, e.g. a causal [T, T] mask.
    const int64_t mn = mask.numel();
    size_t lead = 0;
    while (lead < mask.shape.size() && mask.shape[lead] == 1) ++lead;
    const size_t inner = mask.shape.size() - lead;
    const bool mask_repeats =
        mask.is_contiguous() && mn > 0 && inner <= out.shape.size() &&
        std::equal(mask.shape.begin() + int64_t(lead), mask.shape.end(), out.shape.end() - int64_t(inner));
    parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
      if (mask_repeats) {
        // Runs up to the end of each repetition of the mask: plain loops
        // with an unconditional load, which vectorize.
        for (int64_t i = b, j = b % mn; i < e; j = 0) {
          const int64_t len = std::min(e - i, mn - j);
          const uint8_t* mj = m + j;
          const float* xi = xp + i;
          float* oi = op + i;
          for (int64_t k = 0; k < len; ++k) {
            const float xv = xi[k];
            oi[k] = mj[k] ? v : xv;
          }
          i += len;
        }
      } else {
        for_each_offset(out.shape, ms, b, e, [&](int64_t i, int64_t mo) { op[i] = m[mo] ? v : xp[i]; });
      }
    });
    return;
  }
  const std::array<Strides, 3> st{out.strides, broadcast_strides(x.shape, x.strides, out.shape), ms};
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    for_each_offsets<3>(out.shape, st, b, e, [&](int64_t, const auto& off) {
      copy_elements(out.data + off[0] * isz, m[off[2]] ? value : x.data + off[1] * isz, 1, isz);
    });
  });
}

// ---- tril, triu ---------------------------------------------------------------------------

template <bool kLower>
void triangle_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  const int64_t isz = itemsize(x.dtype);
  if (rows == 0 || cols == 0) return;
  // Past the matrix's corners every diagonal keeps (or drops) the same
  // columns; clamping keeps r + diagonal from overflowing for any int64.
  const int64_t diagonal = std::clamp<int64_t>(c.attrs.i("diagonal"), -rows - 1, cols + 1);
  parallel_for(x.numel() / cols, std::max<int64_t>(1, (1 << 14) / cols), [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t r = q % rows;
      // Kept columns [lo, hi): tril keeps col <= r + diagonal, triu keeps col >= r + diagonal.
      const int64_t lo = kLower ? 0 : std::clamp<int64_t>(r + diagonal, 0, cols);
      const int64_t hi = kLower ? std::clamp<int64_t>(r + diagonal + 1, 0, cols) : cols;
      std::byte* dst = out.data + q * cols * isz;
      const std::byte* src = x.data + q * cols * isz;
      std::memset(dst, 0, size_t(lo * isz));
      std::memcpy(dst + lo * isz, src + lo * isz, size_t((hi - lo) * isz));
      std::memset(dst + hi * isz, 0, size_t((cols - hi) * isz));
    }
  });
}

// ---- slice_backward, select_backward --------------------------------------------------------

// out (input shape) = 0 with out[.., start::step, ..] = grad.
void slice_backward_kernel(const KernelContext& c) {
  const TensorArg& grad = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = c.attrs.i("dim"), start = c.attrs.i("start"), step = c.attrs.i("step");
  const int64_t isz = itemsize(out.dtype);
  std::memset(out.data, 0, size_t(out.numel() * isz));
  Strides region = out.strides;
  region[size_t(dim)] *= step;
  copy_strided(out.data + start * out.strides[size_t(dim)] * isz, region, grad.data, grad.strides,
               grad.shape, isz);
}

// out (input shape) = 0 with out[.., index, ..] = grad.
void select_backward_kernel(const KernelContext& c) {
  const TensorArg& grad = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = c.attrs.i("dim"), index = c.attrs.i("index");
  const int64_t isz = itemsize(out.dtype);
  std::memset(out.data, 0, size_t(out.numel() * isz));
  copy_strided(out.data + index * out.strides[size_t(dim)] * isz, without(out.strides, dim),
               grad.data, grad.strides, grad.shape, isz);
}

}  // namespace

void register_index_kernels() {
  set_cpu_kernel("cat", cat_kernel);
  set_cpu_kernel("index_select", index_select_kernel);
  set_cpu_kernel("index_select_backward", index_select_backward_kernel);
  set_cpu_kernel("gather", gather_kernel);
  set_cpu_kernel("gather_backward", gather_backward_kernel);
  set_cpu_kernel("masked_fill", masked_fill_kernel);
  set_cpu_kernel("masked_fill_", masked_fill_kernel);
  set_cpu_kernel("flip", flip_kernel);
  set_cpu_kernel("scatter_add", scatter_add_kernel);
  set_cpu_kernel("scatter_add_", scatter_add_kernel);
  set_cpu_kernel("index_add", index_add_kernel);
  set_cpu_kernel("index_add_", index_add_kernel);
  set_cpu_kernel("tril", triangle_kernel<true>);
  set_cpu_kernel("triu", triangle_kernel<false>);
}

// The view family's rows need no kernel but for the gradient scatters of
// slice and select, which share this file's strided copies.
void register_view_kernels() {
  set_cpu_kernel("slice_backward", slice_backward_kernel);
  set_cpu_kernel("select_backward", select_backward_kernel);
}

}  // namespace dtr::cpu
