// sort and topk as CUDA kernels (cuda/sort.h): one index per line, a heap
// sort of the line's positions in a scratch buffer under the CPU's total
// order (value with NaN last, then position), so the result is the CPU's
// whatever the algorithm. A first version: a line is sorted by one thread
// in O(n log n), which suits many short lines (top-k over classes, sorting
// rows of logits), not one long line.
#include "cuda/launch.cuh"
#include "cuda/scatter.cuh"
#include "cuda/sort.h"

namespace dtr::cuda {
namespace {

template <typename C>
DTR_HD bool nan_last_less(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return false;
    if (b != b) return true;
  }
  return a < b;
}

template <typename C>
struct LineOrder {
  const std::byte* x;
  DType dt;
  int64_t sz, base, inner;
  bool descending;
  DTR_HD C value(int64_t r) const { return load<C>(x + (base + r * inner) * sz, dt); }
  /// Whether position a comes before position b in the sorted line.
  DTR_HD bool before(int64_t a, int64_t b) const {
    const C va = value(a), vb = value(b);
    if (descending ? nan_last_less(vb, va) : nan_last_less(va, vb)) return true;
    if (descending ? nan_last_less(va, vb) : nan_last_less(vb, va)) return false;
    return a < b;
  }
};

/// Restores the heap below `root` of h[0, n), the root the last in `ord`'s order.
template <typename C>
DTR_HD void sift_down(int64_t* h, int64_t root, int64_t n, const LineOrder<C>& ord) {
  for (;;) {
    int64_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && ord.before(h[child], h[child + 1])) ++child;
    if (!ord.before(h[root], h[child])) return;
    const int64_t t = h[root];
    h[root] = h[child];
    h[child] = t;
    root = child;
  }
}

template <typename C>
void sort_lines_typed(std::byte* values, std::byte* indices, const std::byte* x, DType dt, int64_t outer,
                      int64_t size, int64_t inner, int64_t k, bool descending, int64_t* scratch, const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, outer * inner,
      [=] __host__ __device__(int64_t line) {
        const int64_t o = line / inner, j = line % inner;
        const LineOrder<C> ord{x, dt, sz, o * size * inner + j, inner, descending};
        int64_t* h = scratch + line * size;
        for (int64_t r = 0; r < size; ++r) h[r] = r;
        for (int64_t r = size / 2 - 1; r >= 0; --r) sift_down(h, r, size, ord);
        for (int64_t n = size - 1; n > 0; --n) {
          const int64_t t = h[0];
          h[0] = h[n];
          h[n] = t;
          sift_down(h, 0, n, ord);
        }
        const int64_t out_base = o * k * inner + j;
        for (int64_t r = 0; r < k; ++r) {
          copy_element(values + (out_base + r * inner) * sz, x + (ord.base + h[r] * inner) * sz, sz);
          reinterpret_cast<int64_t*>(indices)[out_base + r * inner] = h[r];
        }
      },
      "sort");
}

}  // namespace

void launch_sort_lines(std::byte* values, std::byte* indices, const std::byte* x, DType dt, int64_t outer,
                       int64_t size, int64_t inner, int64_t k, bool descending, const Exec& e) {
  if (outer * inner == 0 || k == 0) return;
  Scratch s(e, size_t(outer * inner * size) * sizeof(int64_t));
  int64_t* scratch = s.as<int64_t>();
  compute_dispatch(dt, [&](auto tag) {
    sort_lines_typed<decltype(tag)>(values, indices, x, dt, outer, size, inner, k, descending, scratch, e);
  });
}

}  // namespace dtr::cuda
