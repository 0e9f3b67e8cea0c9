// Deterministic parallel loops (Note [determinism]): the work is cut into
// chunks whose boundaries depend only on `n` and `grain`, never on the thread
// count, and each index is computed by exactly one thread. A reduction across
// chunks must combine per-chunk partials in chunk order (see parallel_reduce).
//
// The loops run on dtr's own thread pool (core/parallel.cpp): the calling
// thread plus num_threads() - 1 workers that sleep on a condition variable
// between jobs (after a short bounded spin). A parallel_for called from
// inside another one, or from a second thread while the pool is busy, runs
// its chunks serially on the calling thread, with the same chunks. An
// exception thrown by the loop body reaches the caller of parallel_for: the
// chunks not yet started are skipped, the running ones finish, and the
// exception of the lowest-numbered failing chunk is rethrown (the one a
// serial run would throw).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dtr {

/// Threads used by kernels, the caller included. Default: OMP_NUM_THREADS
/// when set to a positive integer (the variable PyTorch and OpenBLAS users
/// already set), else the number of CPUs this process may run on. The pool
/// grows or shrinks to match at the next parallel loop.
int num_threads();
/// Sets the kernel thread count (values below 1 mean 1), like
/// torch.set_num_threads. Results do not depend on it (Note [determinism]).
void set_num_threads(int n);

/// True on a thread that is running chunks of a parallel loop.
bool in_parallel_region();

namespace detail {
/// Calls fn(ctx, c) for every c in [0, nchunks), each exactly once, spread
/// over the pool; returns when all have finished. Rethrows as described above.
void run_chunks(int64_t nchunks, void (*fn)(void*, int64_t), void* ctx);
}  // namespace detail

/// Calls f(begin, end) over [0, n) in chunks of at least `grain` indices
/// (at most 256 chunks). f must compute each index independently of how the
/// range is cut: with one thread it may see [0, n) at once.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || num_threads() == 1 || in_parallel_region()) {
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
