#include "core/parallel.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include <omp.h>

namespace dtr {
namespace {
std::atomic<int> g_threads{0};
}

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = omp_get_max_threads();
    if (n < 1) n = 1;
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) { g_threads.store(n < 1 ? 1 : n, std::memory_order_relaxed); }

namespace detail {
void run_chunks(int64_t nchunks, void (*fn)(void*, int64_t), void* ctx) {
  const int threads = num_threads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t c = 0; c < nchunks; ++c) fn(ctx, c);
}
}  // namespace detail

}  // namespace dtr
