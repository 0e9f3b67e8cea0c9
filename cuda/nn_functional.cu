// CUDA kernels of embedding (row gather; the gradient as one index per
// weight element summing its rows in increasing position, after a stable
// grouping of the positions by index: no atomics, the CPU's order), dropout
// (the CPU's Philox draws: draw i decides element i, so a seeded mask is the
// CPU's bit for bit), one_hot and multinomial (one index per row drawing
// its samples in order, as the CPU's per-row loop). Semantics:
// cpu/nn_functional.cpp.
#include "cuda/index.h"
#include "cuda/launch.cuh"
#include "cuda/scatter.cuh"

namespace dtr::cuda {

void launch_embedding(std::byte* out, const std::byte* w, int64_t isz, const std::byte* idx, DType idx_dt, int64_t n,
                      int64_t D, const Exec& e) {
  launch(
      e, n * D,
      [=] __host__ __device__(int64_t q) {
        const int64_t i = q / D, d = q % D;
        copy_element(out + q * isz, w + (load_index(idx, idx_dt, i) * D + d) * isz, isz);
      },
      "embedding");
}

namespace {

template <typename C>
void embedding_backward_typed(std::byte* out, DType dt, const std::byte* grad, const int64_t* start,
                              const int64_t* order, int64_t V, int64_t D, const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, V * D,
      [=] __host__ __device__(int64_t q) {
        const int64_t v = q / D, d = q % D;
        C acc = C(0);
        for (int64_t k = start[v]; k < start[v + 1]; ++k) acc += load<C>(grad + (order[k] * D + d) * sz, dt);
        store<C>(out + q * sz, dt, acc);
      },
      "embedding_backward");
}

template <typename C>
void dropout_typed(std::byte* y, std::byte* mask, const std::byte* x, DType dt, int64_t n, double p, double scale,
                   RngState rng, const Exec& e) {
  const int64_t sz = itemsize(dt);
  const C s = C(scale);
  launch(
      e, n,
      [=] __host__ __device__(int64_t i) {
        const bool keep = double(u32_to_uniform(philox_u32(rng, uint64_t(i)))) >= p;
        reinterpret_cast<uint8_t*>(mask)[i] = keep ? 1 : 0;
        store<C>(y + i * sz, dt, load<C>(x + i * sz, dt) * (keep ? s : C(0)));
      },
      "dropout");
}

template <typename C>
void dropout_backward_typed(std::byte* out, const std::byte* grad, const std::byte* mask, DType dt, int64_t n,
                            double scale, const Exec& e) {
  const int64_t sz = itemsize(dt);
  const C s = C(scale);
  launch(
      e, n,
      [=] __host__ __device__(int64_t i) {
        const bool keep = reinterpret_cast<const uint8_t*>(mask)[i] != 0;
        store<C>(out + i * sz, dt, load<C>(grad + i * sz, dt) * (keep ? s : C(0)));
      },
      "dropout_backward");
}

}  // namespace

void launch_embedding_backward(std::byte* out, DType dt, const std::byte* grad, const std::byte* idx, DType idx_dt,
                               int64_t n, int64_t V, int64_t D, const Exec& e) {
  Scratch s(e, size_t(V + 1 + n) * sizeof(int64_t));
  int64_t* start = s.as<int64_t>();
  int64_t* order = start + V + 1;
  group_by_index(idx, idx_dt, n, V, start, order, e);
  compute_dispatch(dt, [&](auto tag) { embedding_backward_typed<decltype(tag)>(out, dt, grad, start, order, V, D, e); });
}

void launch_dropout(std::byte* y, std::byte* mask, const std::byte* x, DType dt, int64_t n, double p, double scale,
                    RngState rng, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { dropout_typed<decltype(tag)>(y, mask, x, dt, n, p, scale, rng, e); });
}

void launch_dropout_backward(std::byte* out, const std::byte* grad, const std::byte* mask, DType dt, int64_t n,
                             double scale, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { dropout_backward_typed<decltype(tag)>(out, grad, mask, dt, n, scale, e); });
}

void launch_one_hot(std::byte* out, const std::byte* idx, int64_t n, int64_t classes, const Exec& e) {
  launch(
      e, n * classes,
      [=] __host__ __device__(int64_t q) {
        const int64_t i = q / classes, k = q % classes;
        reinterpret_cast<int64_t*>(out)[q] = reinterpret_cast<const int64_t*>(idx)[i] == k ? 1 : 0;
      },
      "one_hot");
}

BadRow check_multinomial_rows(const std::byte* p, DType dt, int64_t rows, int64_t categories, int64_t samples,
                              bool replacement, const Exec& e) {
  BadRow r;
  if (rows <= 0) return r;
  // Per row: kind, category, count, value (as double bits); then the first bad row.
  Scratch s(e, size_t(4 * rows + 5) * sizeof(int64_t));
  int64_t* part = s.as<int64_t>();
  int64_t* result = part + 4 * rows;
  const int64_t sz = itemsize(dt);
  launch(
      e, rows,
      [=] __host__ __device__(int64_t row) {
        int64_t* out = part + 4 * row;
        double total = 0;
        int64_t nonzero = 0;
        for (int k = 0; k < 4; ++k) out[k] = 0;
        for (int64_t j = 0; j < categories; ++j) {
          const double v = load<double>(p + (row * categories + j) * sz, dt);
          if (!(v >= 0 && v <= 1.7976931348623157e308)) {  // NaN, inf or negative
            out[0] = 1;
            out[1] = j;
            *reinterpret_cast<double*>(out + 3) = v;
            return;
          }
          total += v;
          nonzero += v > 0 ? 1 : 0;
        }
        if (!(total > 0)) out[0] = 2;
        else if (!replacement && samples > nonzero) out[0] = 3;
        out[2] = nonzero;
      },
      "multinomial_check");
  launch(
      e, 1,
      [=] __host__ __device__(int64_t) {
        for (int k = 0; k < 5; ++k) result[k] = 0;
        result[0] = -1;
        for (int64_t row = 0; row < rows; ++row) {
          if (part[4 * row] != 0) {
            result[0] = row;
            for (int k = 0; k < 4; ++k) result[1 + k] = part[4 * row + k];
            return;
          }
        }
      },
      "multinomial_check_combine");
  int64_t host[5];
  read_back(host, result, sizeof host, e);
  r.row = host[0];
  r.kind = host[1];
  r.category = host[2];
  r.count = host[3];
  std::memcpy(&r.value, &host[4], sizeof r.value);
  return r;
}

void launch_multinomial(std::byte* out, const std::byte* p, DType dt, int64_t rows, int64_t categories,
                        int64_t samples, bool replacement, RngState rng, const Exec& e) {
  if (rows * samples == 0) return;
  // Per row: the running sums (with replacement) or the remaining weights (without).
  Scratch s(e, size_t(rows * categories) * sizeof(double));
  double* work = s.as<double>();
  const int64_t sz = itemsize(dt);
  launch(
      e, rows,
      [=] __host__ __device__(int64_t r) {
        double* w = work + r * categories;
        int64_t last = 0;  // the last category with a non-zero weight
        double acc = 0;
        for (int64_t j = 0; j < categories; ++j) {
          const double v = load<double>(p + (r * categories + j) * sz, dt);
          acc += v;
          w[j] = replacement ? acc : v;
          if (v > 0) last = j;
        }
        int64_t* y = reinterpret_cast<int64_t*>(out) + r * samples;
        for (int64_t k = 0; k < samples; ++k) {
          const uint64_t i = uint64_t(r * samples + k);
          const uint64_t bits = (uint64_t(philox_u32(rng, 2 * i)) << 32) | philox_u32(rng, 2 * i + 1);
          const double u = double(bits >> 11) * (1.0 / 9007199254740992.0);
          int64_t pick = last;
          if (replacement) {
            // upper_bound: the first running sum above the target.
            const double target = u * w[categories - 1];
            int64_t lo = 0, hi = categories;
            while (lo < hi) {
              const int64_t mid = lo + (hi - lo) / 2;
              if (w[mid] > target) hi = mid;
              else lo = mid + 1;
            }
            pick = lo < last ? lo : last;
          } else {
            double remaining = 0;
            for (int64_t j = 0; j < categories; ++j) remaining += w[j];
            const double target = u * remaining;
            double run = 0;
            int64_t last_left = 0;
            pick = -1;
            for (int64_t j = 0; j < categories; ++j) {
              if (w[j] <= 0) continue;
              last_left = j;
              run += w[j];
              if (run > target) {
                pick = j;
                break;
              }
            }
            if (pick < 0) pick = last_left;  // u * remaining rounded up to the total
            w[pick] = 0;
          }
          y[k] = pick;
        }
      },
      "multinomial");
}

}  // namespace dtr::cuda
