// PyTorch's type promotion for elementwise ops (torch.result_type) and its
// casting rule for in-place results (torch.can_cast). Shared by the op rows,
// which pick output dtypes, and the kernels, which pick compute types.
#pragma once

#include <optional>

#include "core/dtype.h"

namespace dtr {

/// Accumulates operands in the three priority classes of torch.result_type:
/// dimensioned tensors, zero-dim tensors and wrapped scalars. A lower class
/// only changes the result when it is of a higher category (bool < integer <
/// floating): int32 tensor + 0-d int64 tensor is int32, int32 tensor + 2.5 is
/// float32 (a float scalar counts as the default dtype float32, an integer
/// scalar as int64).
class ResultType {
 public:
  ResultType& tensor(DType t, int64_t ndim) {
    add(ndim == 0 ? zero_dim_ : dimensioned_, t);
    return *this;
  }
  ResultType& scalar(bool is_floating_scalar) {
    add(scalar_, is_floating_scalar ? kFloat32 : kInt64);
    return *this;
  }
  /// The promoted dtype; float32 when nothing was added.
  DType get() const {
    const auto r = combine(dimensioned_, combine(zero_dim_, scalar_));
    return r.value_or(kFloat32);
  }

 private:
  static void add(std::optional<DType>& slot, DType t) {
    slot = slot.has_value() ? promote_types(*slot, t) : t;
  }
  static std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
    if (!higher.has_value()) return lower;
    if (!lower.has_value()) return higher;
    if (is_floating(*higher)) return higher;
    if (*higher == kBool || is_floating(*lower)) return promote_types(*higher, *lower);
    return higher;
  }

  std::optional<DType> dimensioned_, zero_dim_, scalar_;
};

/// torch.can_cast: whether an op whose result has dtype `from` may write it
/// into a tensor of dtype `to` (floating into integer, or anything but bool
/// into bool, is refused).
constexpr bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

}  // namespace dtr
