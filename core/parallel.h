// Deterministic parallel loops (Note [determinism]): the work is cut into
// chunks whose boundaries depend only on `n` and `grain`, never on the thread
// count, and each index is computed by exactly one thread. A reduction across
// chunks must combine per-chunk partials in chunk order (see parallel_reduce).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dtr {

/// Threads used by kernels (default: hardware concurrency, or OMP_NUM_THREADS).
int num_threads();
void set_num_threads(int n);

namespace detail {
void run_chunks(int64_t nchunks, void (*fn)(void*, int64_t), void* ctx);
}

/// Calls f(begin, end) over [0, n) in chunks of at least `grain` indices.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || num_threads() == 1) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t nchunks = std::min<int64_t>((n + grain - 1) / grain, 256);
  const int64_t chunk = (n + nchunks - 1) / nchunks;
  struct Ctx {
    F* f;
    int64_t n, chunk;
  } ctx{&f, n, chunk};
  detail::run_chunks(
      nchunks,
      [](void* p, int64_t c) {
        auto* x = static_cast<Ctx*>(p);
        const int64_t b = c * x->chunk;
        const int64_t e = std::min(x->n, b + x->chunk);
        if (b < e) (*x->f)(b, e);
      },
      &ctx);
}

/// Deterministic sum-style reduction: partials over fixed blocks of `block`
/// indices (independent of threads), combined left to right.
template <typename T, typename F>
T parallel_reduce(int64_t n, int64_t block, T init, F&& partial) {
  if (n <= 0) return init;
  const int64_t nblocks = (n + block - 1) / block;
  std::vector<T> parts(size_t(nblocks), init);
  parallel_for(nblocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) parts[size_t(b)] = partial(b * block, std::min(n, (b + 1) * block));
  });
  T acc = init;
  for (const T& p : parts) acc = acc + p;
  return acc;
}

}  // namespace dtr
