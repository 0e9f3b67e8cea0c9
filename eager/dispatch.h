// The one dispatch function every op goes through (DESIGN.md "The path of
// one op"): registry row → autocast → make inputs resident and lock them →
// infer and allocate outputs under the budget → kernel → lineage node →
// unlock → autograd node.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "core/op_registry.h"
#include "eager/tensor.h"

namespace dtr {

/// Runs `op` on `inputs`. For in-place ops, output 0 is input 0 (same impl).
std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs, Attrs attrs = {});
/// Single-output convenience.
Tensor dispatch1(const OpDef& op, std::span<const Tensor> inputs, Attrs attrs = {});
inline Tensor dispatch1(const OpDef& op, std::initializer_list<Tensor> inputs, Attrs attrs = {}) {
  return dispatch1(op, std::span<const Tensor>(inputs.begin(), inputs.size()), std::move(attrs));
}

/// The registry row named `name`, registering all ops on first use. Cache it:
///   static const OpDef& op = dtr::op("add");
const OpDef& op(std::string_view name);

/// Seconds one call is estimated to take on `device`, by its backend's
/// roofline (Note [scores]).
double estimate_seconds(const OpCost& cost, Device device);

/// Makes every op row and kernel known (idempotent; called by op()).
void ensure_ops_registered();

}  // namespace dtr
