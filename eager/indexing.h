// Tensor indexing with libtorch's torch::indexing names and PyTorch's
// semantics: Tensor::index({...}) reads, Tensor::index_put_({...}, v) writes.
// Python's x[...] and x[...] = v go through the same code (bindings turn
// slices, lists and masks into TensorIndex).
//
//   using namespace dtr::indexing;
//   x.index({Slice(), 0})                 // x[:, 0]        (a view)
//   x.index({"...", Slice(None, -1)})     // x[..., :-1]    (a view)
//   x.index({idx})                        // x[idx]         (int64 idx: a copy)
//   x.index({x > 0})                      // x[x > 0]       (bool mask: a copy)
//   x.index_put_({mask}, 0.0)             // x[mask] = 0
//
// Basic indices (ints, Slice, None, Ellipsis, Python bools) give views that
// share x's storage. Advanced indices (int64/int32 tensors, bool tensors)
// give copies built from registry rows (permute, reshape, index_select,
// where), so the result is differentiable and replays bitwise under a
// budget. Several advanced indices broadcast together; their dims go where
// the first one was when they are adjacent, else first (PyTorch's rule).
// Negative indices count from the end. An index out of range is an
// IndexError naming the dim, its size and the index; a bool mask whose shape
// does not match the dims it covers is an IndexError naming both shapes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "eager/tensor.h"

namespace dtr::indexing {

/// Python's None in an index (a new dim of size 1), and "absent" in a Slice
/// bound, as libtorch's torch::indexing::None.
inline constexpr std::nullopt_t None = std::nullopt;

/// Python's `...`: as many full slices as the other indices leave dims.
struct EllipsisIndexType {};
inline constexpr EllipsisIndexType Ellipsis{};

/// Python's start:stop:step; absent bounds are the ends, step defaults to 1
/// (ValueError for a step <= 0, as PyTorch).
struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop, step;
};

/// One entry of an index: an int, a Slice, None, Ellipsis ("..." too), a
/// bool, or a Tensor (int64/int32 positions or a bool mask).
class TensorIndex {
 public:
  enum class Kind { kInt, kSlice, kNone, kEllipsis, kBool, kTensor };
  TensorIndex(std::nullopt_t) : kind_(Kind::kNone) {}  // NOLINT
  TensorIndex(EllipsisIndexType) : kind_(Kind::kEllipsis) {}  // NOLINT
  /// Only "..." (ValueError otherwise), as libtorch.
  TensorIndex(const char* s);  // NOLINT
  TensorIndex(bool b) : kind_(Kind::kBool), int_(b ? 1 : 0) {}  // NOLINT
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  TensorIndex(I i) : kind_(Kind::kInt), int_(int64_t(i)) {}  // NOLINT
  TensorIndex(Slice s) : kind_(Kind::kSlice), slice_(s) {}  // NOLINT
  TensorIndex(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_integer() const { return kind_ == Kind::kInt; }
  bool is_slice() const { return kind_ == Kind::kSlice; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_ellipsis() const { return kind_ == Kind::kEllipsis; }
  bool is_boolean() const { return kind_ == Kind::kBool; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  int64_t integer() const { return int_; }
  bool boolean() const { return int_ != 0; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t int_ = 0;
  Slice slice_;
  Tensor tensor_;
};

/// x[indices] (torch.Tensor.index / Tensor.__getitem__). A view when every
/// index is basic, else a copy. IndexError: too many indices, more than one
/// Ellipsis, an int or tensor entry out of range, a mask shape mismatch;
/// TypeError for a tensor index of a float dtype.
Tensor get(const Tensor& x, const std::vector<TensorIndex>& indices);
/// x[indices] = value (torch.Tensor.index_put_ / Tensor.__setitem__): writes
/// `value` broadcast to the shape x[indices] has, in place into x, as one
/// in-place op autograd and lineage see (copy_ or masked_fill_ on x or on
/// its basic view). With duplicate positions the last write wins.
/// ValueError when value does not broadcast; the errors of get otherwise.
void put(Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& value);
void put(Tensor& x, const std::vector<TensorIndex>& indices, Scalar value);

}  // namespace dtr::indexing
