// Shared pieces of the indexing kernels (cuda/index.cu, cuda/nn_functional.cu):
// the index range check through an error buffer, and
// a deterministic stable grouping of positions by index value (the counting
// sort of cpu/nn_functional.cpp's embedding_backward, done by launches that
// each write only their own outputs). Included by cuda/*.cu only.
#pragma once

#include <cstdlib>
#include <cstring>

#include "cuda/index.h"
#include "cuda/launch.cuh"
#include "cuda/scratch.h"

namespace dtr::cuda {

/// Index i of an int64 or int32 index tensor (contiguous).
DTR_HD int64_t load_index(const std::byte* p, DType dt, int64_t i) {
  return dt == DType::kInt64 ? reinterpret_cast<const int64_t*>(p)[i] : int64_t(reinterpret_cast<const int32_t*>(p)[i]);
}

/// Copies one element of `isz` bytes.
DTR_HD void copy_element(std::byte* dst, const std::byte* src, int64_t isz) {
  switch (isz) {
    case 8: *reinterpret_cast<uint64_t*>(dst) = *reinterpret_cast<const uint64_t*>(src); return;
    case 4: *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src); return;
    case 2: *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src); return;
    default: *dst = *src; return;
  }
}
/// Writes `isz` zero bytes (0 in every dtype).
DTR_HD void zero_element(std::byte* dst, int64_t isz) {
  for (int64_t b = 0; b < isz; ++b) dst[b] = std::byte{0};
}

/// Elements of d (1 for 0-d).
inline int64_t numel_of(const Dims& d) {
  int64_t n = 1;
  for (int k = 0; k < d.ndim; ++k) n *= d.size[k];
  return n;
}

/// Coordinates of row-major linear index i over d's sizes.
DTR_HD void coords_of(const Dims& d, int64_t i, int64_t* c) {
  for (int k = d.ndim - 1; k >= 0; --k) {
    c[k] = i % d.size[k];
    i /= d.size[k];
  }
}

/// v rounded to dtype dt and back to C (a store and a load).
template <typename C>
DTR_HD C round_to(C v, DType dt) {
  // store/load access it as an 8-byte type: a byte array alone may sit
  // misaligned in a device thread's local memory.
  alignas(8) std::byte b[8];
  store<C>(b, dt, v);
  return load<C>(b, dt);
}

/// Indices per chunk of the range check's first launch.
inline constexpr int64_t kCheckChunk = 4096;

/// The first position (and its value) of an index tensor outside [lo, hi):
/// one index per chunk of kCheckChunk finds its chunk's first, then one
/// index takes the first over the chunks in order, into a two-int64 error
/// buffer read back by the host (a kernel cannot throw).
inline BadIndex first_bad_index(const std::byte* idx, DType dt, int64_t n, int64_t lo, int64_t hi, const Exec& e) {
  BadIndex r;
  if (n <= 0) return r;
  const int64_t chunks = (n + kCheckChunk - 1) / kCheckChunk;
  Scratch s(e, size_t(2 * chunks + 2) * sizeof(int64_t));
  int64_t* part = s.as<int64_t>();  // per chunk: position (or -1), value
  int64_t* result = part + 2 * chunks;
  launch(
      e, chunks,
      [=] __host__ __device__(int64_t c) {
        const int64_t end = (c + 1) * kCheckChunk < n ? (c + 1) * kCheckChunk : n;
        part[2 * c] = -1;
        part[2 * c + 1] = 0;
        for (int64_t i = c * kCheckChunk; i < end; ++i) {
          const int64_t v = load_index(idx, dt, i);
          if (v < lo || v >= hi) {
            part[2 * c] = i;
            part[2 * c + 1] = v;
            return;
          }
        }
      },
      "index_check");
  launch(
      e, 1,
      [=] __host__ __device__(int64_t) {
        result[0] = -1;
        result[1] = 0;
        for (int64_t c = 0; c < chunks; ++c) {
          if (part[2 * c] >= 0) {
            result[0] = part[2 * c];
            result[1] = part[2 * c + 1];
            return;
          }
        }
      },
      "index_check_combine");
  int64_t host[2];
  read_back(host, result, sizeof host, e);
  r.position = host[0];
  r.value = host[1];
  return r;
}

/// Rows per chunk of the grouping's prefix sum.
inline constexpr int64_t kGroupChunk = 1024;

/// Groups the positions 0..n-1 of an index tensor with values in [0, V) by
/// value, stably: afterwards the positions with value v are
/// order[start[v]] .. order[start[v + 1] - 1], increasing. `start` holds V +
/// 1 int64, `order` n. Launches: a count per value (each scans all n
/// indices: O(V n) comparisons, no atomics), per-chunk totals, a serial scan
/// of the chunk totals, per-chunk running sums, and a fill per value.
inline void group_by_index(const std::byte* idx, DType dt, int64_t n, int64_t V, int64_t* start, int64_t* order,
                           const Exec& e) {
  const int64_t chunks = (V + kGroupChunk - 1) / kGroupChunk;
  Scratch s(e, size_t(chunks > 0 ? chunks : 1) * sizeof(int64_t));
  int64_t* base = s.as<int64_t>();
  launch(
      e, V + 1,
      [=] __host__ __device__(int64_t v) {
        if (v == 0) {
          start[0] = 0;
          return;
        }
        int64_t count = 0;
        for (int64_t i = 0; i < n; ++i) count += load_index(idx, dt, i) == v - 1 ? 1 : 0;
        start[v] = count;
      },
      "group_count");
  launch(
      e, chunks,
      [=] __host__ __device__(int64_t c) {
        const int64_t end = (c + 1) * kGroupChunk < V ? (c + 1) * kGroupChunk : V;
        int64_t t = 0;
        for (int64_t v = c * kGroupChunk; v < end; ++v) t += start[v + 1];
        base[c] = t;
      },
      "group_chunk_totals");
  launch(
      e, 1,
      [=] __host__ __device__(int64_t) {
        int64_t run = 0;
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t t = base[c];
          base[c] = run;
          run += t;
        }
      },
      "group_chunk_scan");
  launch(
      e, chunks,
      [=] __host__ __device__(int64_t c) {
        const int64_t end = (c + 1) * kGroupChunk < V ? (c + 1) * kGroupChunk : V;
        int64_t run = base[c];
        for (int64_t v = c * kGroupChunk; v < end; ++v) {
          run += start[v + 1];
          start[v + 1] = run;
        }
      },
      "group_prefix");
  launch(
      e, V,
      [=] __host__ __device__(int64_t v) {
        int64_t k = start[v];
        for (int64_t i = 0; i < n; ++i)
          if (load_index(idx, dt, i) == v) order[k++] = i;
      },
      "group_fill");
}

}  // namespace dtr::cuda
