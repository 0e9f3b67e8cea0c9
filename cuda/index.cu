// Indexing CUDA kernels (cuda/index.h): the data movement of cpu/index.cpp
// as one index per output element, and its accumulating scatters as one
// index per output element summing its sources in a fixed order (index
// position ascending, the CPU's order), so results equal the CPU's bitwise
// and no atomics are needed (Note [determinism]).
#include "core/integer_math.h"
#include "cuda/index.h"
#include "cuda/launch.cuh"
#include "cuda/scatter.cuh"

namespace dtr::cuda {

BadIndex check_index_range(const std::byte* idx, DType dt, int64_t n, int64_t lo, int64_t hi, const Exec& e) {
  return first_bad_index(idx, dt, n, lo, hi, e);
}

void launch_cat_piece(std::byte* out, DType out_dt, const std::byte* in, DType in_dt, int64_t outer, int64_t row,
                      int64_t out_row, int64_t offset, const Exec& e) {
  const int64_t osz = itemsize(out_dt), isz = itemsize(in_dt);
  const bool same = out_dt == in_dt;
  const bool ints = !is_floating(out_dt) && !is_floating(in_dt);
  launch(
      e, outer * row,
      [=] __host__ __device__(int64_t q) {
        const int64_t o = q / row, k = q % row;
        std::byte* dst = out + (o * out_row + offset + k) * osz;
        const std::byte* src = in + q * isz;
        if (same) copy_element(dst, src, osz);
        else if (ints) store<int64_t>(dst, out_dt, load<int64_t>(src, in_dt));
        else store<double>(dst, out_dt, load<double>(src, in_dt));
      },
      "cat");
}

void launch_index_select(std::byte* out, const std::byte* x, int64_t isz, const std::byte* idx, DType idx_dt,
                         int64_t outer, int64_t size, int64_t inner, int64_t n, const Exec& e) {
  launch(
      e, outer * n * inner,
      [=] __host__ __device__(int64_t q) {
        const int64_t i = q % inner, j = (q / inner) % n, o = q / (inner * n);
        copy_element(out + q * isz, x + ((o * size + load_index(idx, idx_dt, j)) * inner + i) * isz, isz);
      },
      "index_select");
}

namespace {

template <typename C>
void index_select_backward_typed(std::byte* out, DType dt, const std::byte* grad, const int64_t* start,
                                 const int64_t* order, int64_t outer, int64_t size, int64_t inner, int64_t n,
                                 const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, outer * size * inner,
      [=] __host__ __device__(int64_t q) {
        const int64_t i = q % inner, v = (q / inner) % size, o = q / (inner * size);
        C acc = C(0);
        for (int64_t k = start[v]; k < start[v + 1]; ++k)
          acc += load<C>(grad + ((o * n + order[k]) * inner + i) * sz, dt);
        store<C>(out + q * sz, dt, acc);
      },
      "index_select_backward");
}

}  // namespace

void launch_index_select_backward(std::byte* out, DType dt, const std::byte* grad, const std::byte* idx, DType idx_dt,
                                  int64_t outer, int64_t size, int64_t inner, int64_t n, const Exec& e) {
  Scratch s(e, size_t(size + 1 + n) * sizeof(int64_t));
  int64_t* start = s.as<int64_t>();
  int64_t* order = start + size + 1;
  group_by_index(idx, idx_dt, n, size, start, order, e);
  compute_dispatch(dt, [&](auto tag) {
    index_select_backward_typed<decltype(tag)>(out, dt, grad, start, order, outer, size, inner, n, e);
  });
}

void launch_gather(std::byte* out, const std::byte* x, int64_t isz, const std::byte* idx, DType idx_dt,
                   const Dims& index, const Dims& x_dims, int dim, const Exec& e) {
  const int64_t n = numel_of(index);
  launch(
      e, n,
      [=] __host__ __device__(int64_t q) {
        int64_t c[kMaxIndexDims];
        coords_of(index, q, c);
        int64_t off = 0;
        for (int d = 0; d < index.ndim; ++d)
          if (d != dim) off += c[d] * x_dims.stride[d];
        if (index.ndim > 0) off += load_index(idx, idx_dt, q) * x_dims.stride[dim];
        copy_element(out + q * isz, x + off * isz, isz);
      },
      "gather");
}

namespace {

template <typename C>
void gather_backward_typed(std::byte* out, DType dt, const std::byte* grad, const std::byte* idx, DType idx_dt,
                           const Dims& out_dims, const Dims& index, int dim, int64_t numel, const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, numel,
      [=] __host__ __device__(int64_t p) {
        int64_t c[kMaxIndexDims];
        coords_of(out_dims, p, c);
        C acc = C(0);
        if (out_dims.ndim == 0) {
          if (index.ndim == 0 || index.size[0] > 0) acc = load<C>(grad, dt);  // 0-d: the one element
        } else {
          bool inside = true;
          int64_t base = 0;
          for (int d = 0; d < out_dims.ndim; ++d) {
            if (d == dim) continue;
            inside = inside && c[d] < index.size[d];
            base += c[d] * index.stride[d];
          }
          if (inside) {
            for (int64_t j = 0; j < index.size[dim]; ++j) {
              const int64_t io = base + j * index.stride[dim];
              if (load_index(idx, idx_dt, io) == c[dim]) acc += load<C>(grad + io * sz, dt);
            }
          }
        }
        store<C>(out + p * sz, dt, acc);
      },
      "gather_backward");
}

}  // namespace

void launch_gather_backward(std::byte* out, DType dt, const std::byte* grad, const std::byte* idx, DType idx_dt,
                            const Dims& out_dims, const Dims& index, int dim, const Exec& e) {
  const int64_t numel = numel_of(out_dims);
  compute_dispatch(dt, [&](auto tag) {
    gather_backward_typed<decltype(tag)>(out, dt, grad, idx, idx_dt, out_dims, index, dim, numel, e);
  });
}

namespace {

template <typename C>
void scatter_add_typed(std::byte* out, DType dt, const Dims& out_dims, const std::byte* x, const Dims& x_dims,
                       const std::byte* idx, DType idx_dt, const Dims& index, const std::byte* src,
                       const Dims& src_dims, int dim, Alpha alpha, bool index_add, const int64_t* start,
                       const int64_t* order, int64_t n_idx, int64_t numel, const Exec& e) {
  const int64_t sz = itemsize(dt);
  const C a = (alpha.use_int && !is_floating(dt)) ? C(alpha.i) : C(alpha.f);
  const bool unit = a == C(1);
  launch(
      e, numel,
      [=] __host__ __device__(int64_t p) {
        int64_t c[kMaxIndexDims];
        coords_of(out_dims, p, c);
        int64_t out_off = 0, x_off = 0;
        for (int d = 0; d < out_dims.ndim; ++d) {
          out_off += c[d] * out_dims.stride[d];
          x_off += c[d] * x_dims.stride[d];
        }
        C acc = load<C>(x + x_off * sz, dt);
        const auto add = [&](int64_t src_off) {
          const C v = load<C>(src + src_off * sz, dt);
          acc = round_to<C>(wrap_add(acc, unit ? v : wrap_mul(a, v)), dt);
        };
        if (out_dims.ndim == 0) {
          // 0-d: every entry of the (one-element) index adds into the one element.
          const int64_t m = index_add ? n_idx : 1;
          for (int64_t j = 0; j < m; ++j) add(j);
        } else if (index_add) {
          int64_t base = 0;
          for (int d = 0; d < out_dims.ndim; ++d)
            if (d != dim) base += c[d] * src_dims.stride[d];
          for (int64_t k = start[c[dim]]; k < start[c[dim] + 1]; ++k) add(base + order[k] * src_dims.stride[dim]);
        } else {
          bool inside = true;
          int64_t ibase = 0, sbase = 0;
          for (int d = 0; d < out_dims.ndim; ++d) {
            if (d == dim) continue;
            inside = inside && c[d] < index.size[d];
            ibase += c[d] * index.stride[d];
            sbase += c[d] * src_dims.stride[d];
          }
          if (inside) {
            for (int64_t j = 0; j < index.size[dim]; ++j)
              if (load_index(idx, idx_dt, ibase + j * index.stride[dim]) == c[dim]) add(sbase + j * src_dims.stride[dim]);
          }
        }
        store<C>(out + out_off * sz, dt, acc);
      },
      index_add ? "index_add" : "scatter_add");
}

}  // namespace

void launch_scatter_add(std::byte* out, DType dt, const Dims& out_dims, const std::byte* x, const Dims& x_dims,
                        const std::byte* idx, DType idx_dt, const Dims& index, const std::byte* src,
                        const Dims& src_dims, int dim, Alpha alpha, bool index_add, const Exec& e) {
  const int64_t numel = numel_of(out_dims);
  // index_add: the positions along dim grouped by their index (one list per output slot).
  const int64_t slots = out_dims.ndim == 0 ? 1 : out_dims.size[dim];
  const int64_t n_idx = index_add ? index.size[0] : 0;
  Scratch s(e, index_add ? size_t(slots + 1 + n_idx) * sizeof(int64_t) : 1);
  int64_t* start = s.as<int64_t>();
  int64_t* order = start + slots + 1;
  if (index_add) group_by_index(idx, idx_dt, n_idx, slots, start, order, e);
  compute_dispatch(dt, [&](auto tag) {
    scatter_add_typed<decltype(tag)>(out, dt, out_dims, x, x_dims, idx, idx_dt, index, src, src_dims, dim, alpha,
                                     index_add, start, order, n_idx, numel, e);
  });
}

void launch_masked_fill(const ElementwiseLayout<3>& L, uint64_t value_bits, int64_t isz, const Exec& e) {
  launch(
      e, L.numel,
      [=] __host__ __device__(int64_t i) {
        int64_t off[3];
        offsets_of(L, i, off);
        const uint64_t v = value_bits;
        const bool fill = *reinterpret_cast<const uint8_t*>(L.data[2] + off[2]) != 0;
        copy_element(L.data[0] + off[0], fill ? reinterpret_cast<const std::byte*>(&v) : L.data[1] + off[1], isz);
      },
      "masked_fill");
}

void launch_triangle(std::byte* out, const std::byte* x, int64_t isz, int64_t numel, int64_t rows, int64_t cols,
                     int64_t diagonal, bool lower, const Exec& e) {
  launch(
      e, numel,
      [=] __host__ __device__(int64_t q) {
        const int64_t col = q % cols, r = (q / cols) % rows;
        const bool keep = lower ? col <= r + diagonal : col >= r + diagonal;
        if (keep) copy_element(out + q * isz, x + q * isz, isz);
        else zero_element(out + q * isz, isz);
      },
      lower ? "tril" : "triu");
}

void launch_flip(std::byte* out, const std::byte* src, int64_t isz, const Dims& d, const Exec& e) {
  const int64_t numel = numel_of(d);
  launch(
      e, numel,
      [=] __host__ __device__(int64_t i) {
        int64_t c[kMaxIndexDims];
        coords_of(d, i, c);
        int64_t off = 0;
        for (int k = 0; k < d.ndim; ++k) off += c[k] * d.stride[k];
        copy_element(out + i * isz, src + off * isz, isz);
      },
      "flip");
}

void launch_slice_backward(std::byte* out, const Dims& out_dims, const std::byte* grad, const Dims& grad_dims,
                           int64_t isz, int dim, int64_t start, int64_t step, const Exec& e) {
  const int64_t numel = numel_of(out_dims);
  launch(
      e, numel,
      [=] __host__ __device__(int64_t p) {
        int64_t c[kMaxIndexDims];
        coords_of(out_dims, p, c);
        int64_t out_off = 0, g_off = 0;
        for (int k = 0; k < out_dims.ndim; ++k) {
          out_off += c[k] * out_dims.stride[k];
          if (k != dim) g_off += c[k] * grad_dims.stride[k];
        }
        const int64_t rel = c[dim] - start;
        if (rel >= 0 && rel % step == 0 && rel / step < grad_dims.size[dim]) {
          copy_element(out + out_off * isz, grad + (g_off + rel / step * grad_dims.stride[dim]) * isz, isz);
        } else {
          zero_element(out + out_off * isz, isz);
        }
      },
      "slice_backward");
}

void launch_select_backward(std::byte* out, const Dims& out_dims, const std::byte* grad, const Dims& grad_dims,
                            int64_t isz, int dim, int64_t index, const Exec& e) {
  const int64_t numel = numel_of(out_dims);
  launch(
      e, numel,
      [=] __host__ __device__(int64_t p) {
        int64_t c[kMaxIndexDims];
        coords_of(out_dims, p, c);
        int64_t out_off = 0, g_off = 0;
        for (int k = 0, g = 0; k < out_dims.ndim; ++k) {
          out_off += c[k] * out_dims.stride[k];
          if (k != dim) g_off += c[k] * grad_dims.stride[g++];
        }
        if (c[dim] == index) copy_element(out + out_off * isz, grad + g_off * isz, isz);
        else zero_element(out + out_off * isz, isz);
      },
      "select_backward");
}

}  // namespace dtr::cuda
