// Helpers shared by the elementwise op families (eager/ops/unary.cpp,
// eager/ops/binary.cpp): op names as template arguments (so one infer
// function serves many rows and still names its op), the checks of in-place
// rows, and gradient reduction for broadcast inputs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

#include "core/type_promotion.h"
#include "eager/ops/registration.h"

namespace dtr::ops {

/// A string literal usable as a template argument: infer_unary<"exp">.
template <size_t N>
struct OpName {
  char chars[N];
  constexpr OpName(const char (&s)[N]) { std::copy_n(s, N, chars); }  // NOLINT
  constexpr std::string_view view() const { return std::string_view(chars, N - 1); }
};

/// Checks of an in-place row writing a result of `result_shape` and
/// `result_dtype` into `self` (PyTorch semantics): the result must have
/// self's shape (ValueError), be castable to self's dtype (TypeError, e.g. a
/// float result into an integer tensor) and self must not have several
/// elements at one memory location (ValueError, e.g. an expanded tensor).
inline void check_inplace_result(std::string_view op, const TensorMeta& self, IntList result_shape,
                                 DType result_dtype) {
  DTR_CHECK(IntList(self.shape) == result_shape, ValueError,
            "{}: output with shape {} doesn't match the broadcast shape {}", op,
            shape_str(self.shape), shape_str(result_shape));
  DTR_CHECK(can_cast(result_dtype, self.dtype), TypeError,
            "{}: result type {} can't be cast to the desired output type {} (shape {})", op,
            dtype_name(result_dtype), dtype_name(self.dtype), shape_str(self.shape));
  for (size_t d = 0; d < self.shape.size(); ++d) {
    DTR_CHECK(self.strides[d] != 0 || self.shape[d] <= 1, ValueError,
              "{}: unsupported operation: more than one element of the written-to tensor (shape "
              "{}, strides {}) refers to a single memory location; clone() it first",
              op, shape_str(self.shape), shape_str(self.strides));
  }
}

/// The gradient of an input of `meta` from the gradient `g` of a broadcast
/// result: summed over broadcast dims and cast back to the input's dtype.
inline Tensor reduce_grad(const Tensor& g, const TensorMeta& meta) {
  Tensor r = autograd::sum_to(g, meta.shape);
  if (is_floating(meta.dtype) && r.dtype() != meta.dtype) r = r.to(meta.dtype);
  return r;
}

/// `other` as input 1 of an in-place op on `self`: a copy when it is a
/// different view of self's storage, so the kernel never reads an element it
/// already wrote (PyTorch refuses such partial overlap; a copy is the
/// friendlier answer). The same view (x.add_(x)) is read before it is written.
inline Tensor unaliased_operand(const Tensor& self, const Tensor& other) {
  if (!self.defined() || !other.defined() || self.storage() != other.storage()) return other;
  const TensorMeta &a = self.meta(), &b = other.meta();
  if (a.shape == b.shape && a.strides == b.strides && a.offset == b.offset) return other;
  return other.clone();
}

}  // namespace dtr::ops
