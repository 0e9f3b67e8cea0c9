// Helpers for defining op rows (eager/ops/<family>.cpp). Each family file
// defines `void register_<family>_ops()`; the families are listed once, in
// core/op_families.h.
#pragma once

#include <span>
#include <vector>

#include "core/error.h"
#include "core/op_families.h"
#include "core/op_registry.h"
#include "eager/autograd.h"
#include "eager/dispatch.h"
#include "eager/ops.h"

namespace dtr::ops {

/// A contiguous output meta of `shape` and `dtype` on `device`.
inline TensorMeta out_meta(IntList shape, DType dtype, Device device) {
  TensorMeta m;
  m.shape = Shape(shape.begin(), shape.end());
  m.strides = contiguous_strides(shape);
  m.dtype = dtype;
  m.device = device;
  return m;
}

/// The attributes of a fill value (full, masked_fill): "value" as a double,
/// and "int_value" too for an integer or bool, so integer outputs keep every
/// bit (a double holds only 53).
inline Attrs fill_value_attrs(Scalar value) {
  Attrs a{{"value", value.to_double()}};
  if (!value.is_floating()) a.set("int_value", value.to_int());
  return a;
}

/// Throws TypeError unless `m` is floating point.
inline void check_floating(std::string_view op, const TensorMeta& m, std::string_view what = "input") {
  DTR_CHECK(is_floating(m.dtype), TypeError, "{}: expected a floating point {}, got {} of shape {}",
            op, what, dtype_name(m.dtype), shape_str(m.shape));
}

/// Every family's registration function (core/op_families.h).
#define DTR_DECLARE_OPS(family) void register_##family##_ops();
DTR_OP_FAMILIES(DTR_DECLARE_OPS)
#undef DTR_DECLARE_OPS

}  // namespace dtr::ops
