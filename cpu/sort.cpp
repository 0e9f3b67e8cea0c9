// Sorting kernels: sort and topk (eager/ops/sort.cpp). Each line along the
// sorted dim (of a contiguous input) is sorted on its own with a total
// order, (value, index), so the result never depends on the thread count or
// the algorithm: NaN is larger than every number, equal values keep the
// lower index first (Note [determinism]).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/accumulate.h"
#include "cpu/kernels.h"

namespace dtr::cpu {
namespace {

/// a < b with NaN larger than every number (NaNs equal among themselves).
template <typename C>
bool nan_last_less(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

/// The lines of a contiguous `in` along `dim`: (outer, size, inner).
struct Lines {
  int64_t outer = 1, size = 1, inner = 1;
};

Lines lines_of(const TensorArg& in, int64_t dim) {
  Lines l;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const int64_t n = in.shape[size_t(d)];
    if (d < dim) l.outer *= n;
    if (d == dim) l.size = n;
    if (d > dim) l.inner *= n;
  }
  return l;
}

/// Sorts each line of input 0 along attrs' dim and writes its first `k`
/// elements (values and int64 indices) to the outputs, whose dim has size k.
/// `descending` puts the largest first; either way ties keep index order.
void sort_lines(const KernelContext& c, int64_t k, bool descending, bool partial) {
  const TensorArg& in = c.inputs[0];
  const Lines l = lines_of(in, c.attrs.i("dim"));
  if (k == 0 && in.dim() > 0) return;
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    struct Item {
      C v;
      int64_t i;
    };
    const T* x = in.ptr<T>();
    T* values = c.outputs[0].ptr<T>();
    int64_t* indices = c.outputs[1].ptr<int64_t>();
    // A 0-d input is one line of one element; its 0-d outputs hold it for k = 0 too.
    const int64_t kout = in.dim() == 0 ? 1 : k;
    auto before = [descending](const Item& a, const Item& b) {
      if (descending ? nan_last_less(b.v, a.v) : nan_last_less(a.v, b.v)) return true;
      if (descending ? nan_last_less(a.v, b.v) : nan_last_less(b.v, a.v)) return false;
      return a.i < b.i;
    };
    parallel_for(l.outer * l.inner, std::max<int64_t>(1, (int64_t{1} << 12) / std::max<int64_t>(1, l.size)),
                 [&](int64_t b, int64_t e) {
                   std::vector<Item> items(size_t(l.size));
                   for (int64_t line = b; line < e; ++line) {
                     const int64_t o = line / l.inner, j = line % l.inner;
                     const int64_t in_base = o * l.size * l.inner + j;
                     for (int64_t r = 0; r < l.size; ++r) items[size_t(r)] = Item{to_compute(x[in_base + r * l.inner]), r};
                     if (partial) {
                       std::partial_sort(items.begin(), items.begin() + kout, items.end(), before);
                     } else {
                       std::sort(items.begin(), items.end(), before);
                     }
                     const int64_t out_base = o * kout * l.inner + j;
                     for (int64_t r = 0; r < kout; ++r) {
                       const int64_t src = items[size_t(r)].i;
                       values[out_base + r * l.inner] = x[in_base + src * l.inner];
                       indices[out_base + r * l.inner] = src;
                     }
                   }
                 });
  });
}

// sort: inputs (x); attrs dim, descending → (values, int64 indices) of x's shape.
void sort_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const int64_t size = in.dim() == 0 ? 1 : in.shape[size_t(c.attrs.i("dim"))];
  sort_lines(c, size, c.attrs.b("descending"), /*partial=*/false);
}

// topk: inputs (x); attrs k, dim, largest, sorted → the first k of the sort
// (descending when largest); always in sorted order.
void topk_kernel(const KernelContext& c) {
  sort_lines(c, c.attrs.i("k"), c.attrs.b("largest"), /*partial=*/true);
}

}  // namespace

void register_sort_kernels() {
  set_cpu_kernel("sort", sort_kernel);
  set_cpu_kernel("topk", topk_kernel);
}

}  // namespace dtr::cpu
