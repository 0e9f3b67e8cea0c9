#include "core/shape.h"

#include <ostream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/shape_check.h"
#include "core/shape_io.h"

namespace dtr {

namespace {
thread_local std::string_view t_shape_op;

/// "shape [..] has too many elements", after the op's name when a
/// ShapeCheckScope names one.
[[noreturn]] void throw_too_many(IntList shape) {
  const std::string what = fmt::format("shape {} has too many elements (2^60 or more)", shape_str(shape));
  if (t_shape_op.empty()) throw ValueError(what);
  throw ValueError(fmt::format("{}: {}", t_shape_op, what));
}
}  // namespace

ShapeCheckScope::ShapeCheckScope(std::string_view op) noexcept : previous_(t_shape_op) { t_shape_op = op; }
ShapeCheckScope::~ShapeCheckScope() { t_shape_op = previous_; }

int64_t numel(IntList shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    // A shape whose element count overflows is a user error, never a wrap.
    // Below 2^60 elements, the byte size of every dtype (8 bytes at most)
    // fits in int64 too.
    if (__builtin_mul_overflow(n, s, &n) || n >= kMaxNumel) [[unlikely]]
      throw_too_many(shape);
  }
  return n;
}

Strides contiguous_strides(IntList shape) {
  // The element count is checked first: below it, no stride can overflow.
  const bool empty = numel(shape) == 0;
  Strides st(shape.size());
  int64_t acc = 1;
  for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
    st[size_t(i)] = acc;
    // An empty tensor's strides address nothing; where the product of its
    // other sizes overflows, the outer strides stay at the last one that fits.
    int64_t next = 0;
    if (!__builtin_mul_overflow(acc, std::max<int64_t>(shape[size_t(i)], 1), &next)) {
      acc = next;
    } else {
      // (Only reachable otherwise with negative sizes, which callers reject.)
      if (!empty) throw_too_many(shape);
    }
  }
  return st;
}

bool is_contiguous(IntList shape, IntList strides) {
  int64_t expected = 1;
  for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
    const int64_t s = shape[size_t(i)];
    if (s == 0) return true;
    if (s != 1 && strides[size_t(i)] != expected) return false;
    expected *= s;
  }
  return true;
}

std::string shape_str(IntList shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t normalize_dim(int64_t dim, int64_t ndim, std::string_view op) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  DTR_CHECK(dim >= lo && dim <= hi, IndexError,
            "{}: dimension out of range (expected to be in range of [{}, {}], but got {})", op, lo,
            hi, dim);
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(IntList a, IntList b, std::string_view op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    DTR_CHECK(da == db || da == 1 || db == 1, ValueError,
              "{}: shapes {} and {} are not broadcastable (size {} vs {} at dimension {})", op,
              shape_str(a), shape_str(b), da, db, i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(IntList shape, IntList strides, IntList target) {
  Strides out(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    out[lead + i] = shape[i] == 1 && target[lead + i] != 1 ? 0 : strides[i];
  }
  return out;
}

}  // namespace dtr

namespace absl {
std::ostream& operator<<(std::ostream& os, const dtr::Shape& shape) { return os << dtr::shape_str(shape); }
}  // namespace absl
