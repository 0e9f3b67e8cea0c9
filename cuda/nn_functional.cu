// CUDA kernels of embedding (row gather; the gradient as one index per
// weight element summing its rows in increasing position, after a stable
// grouping of the positions by index: no atomics, the CPU's order), dropout
// (the CPU's Philox draws: draw i decides element i, so a seeded mask is the
// CPU's bit for bit) and one_hot. Semantics: cpu/nn_functional.cpp.
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
  Scratch s(size_t(V + 1 + n) * sizeof(int64_t), e);
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

}  // namespace dtr::cuda
