// Shapes and strides (in elements), and the dim/broadcast helpers every op uses.
#pragma once

#include <cstdint>
#include <span>
#include <initializer_list>
#include <string>
#include <vector>

#include <absl/container/inlined_vector.h>

namespace dtr {

using Shape = absl::InlinedVector<int64_t, 6>;
using Strides = absl::InlinedVector<int64_t, 6>;

/// A non-owning list of int64 (like c10::IntArrayRef): binds to `{2, 3}`,
/// a Shape, a std::vector, a span, or a single integer (a list of one, as
/// c10::ArrayRef's one-element constructor: `x.sum(1)`, `max_pool2d(x, 2)`).
/// A braced list or an integer argument lives until the end of the full
/// expression, so never store an IntList.
class IntList {
 public:
  constexpr IntList() = default;
#if defined(__GNUC__) && !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  constexpr IntList(std::initializer_list<int64_t> l) : data_(l.begin()), size_(l.size()) {}  // NOLINT
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  /// A list of one element, `one` itself (not copied).
  constexpr IntList(const int64_t& one) : data_(&one), size_(1) {}  // NOLINT: implicit like c10
  IntList(const Shape& s) : data_(s.data()), size_(s.size()) {}                  // NOLINT
  IntList(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  constexpr IntList(std::span<const int64_t> s) : data_(s.data()), size_(s.size()) {}  // NOLINT
  constexpr IntList(const int64_t* d, size_t n) : data_(d), size_(n) {}

  constexpr const int64_t* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr int64_t operator[](size_t i) const { return data_[i]; }
  constexpr int64_t back() const { return data_[size_ - 1]; }
  Shape vec() const { return Shape(begin(), end()); }
  friend bool operator==(IntList a, IntList b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

/// Shapes have fewer elements than this (so any dtype's byte size fits in int64).
inline constexpr int64_t kMaxNumel = int64_t{1} << 60;

/// Product of the sizes; 1 for a 0-d shape. Checks before each multiply:
/// throws ValueError naming the shape when the count reaches kMaxNumel
/// (torch: "Storage size calculation overflowed").
int64_t numel(IntList shape);

/// Row-major (C-contiguous) strides for `shape`, in elements. Throws
/// ValueError (from numel) for a shape with kMaxNumel elements or more.
Strides contiguous_strides(IntList shape);

/// True when `strides` are the row-major strides of `shape` (size-1 dims ignored).
bool is_contiguous(IntList shape, IntList strides);

/// "[2, 3, 4]"
std::string shape_str(IntList shape);

/// Wraps a possibly negative `dim` into [0, ndim). Throws IndexError naming `op`.
int64_t normalize_dim(int64_t dim, int64_t ndim, std::string_view op);

/// Broadcast two shapes (NumPy/PyTorch rules). Throws ValueError naming `op`.
Shape broadcast_shapes(IntList a, IntList b, std::string_view op);

/// Strides that view a tensor of (`shape`, `strides`) as `target` by
/// broadcasting (stride 0 on expanded dims). `shape` must broadcast to `target`.
Strides broadcast_strides(IntList shape, IntList strides, IntList target);

}  // namespace dtr
