#include "core/op_registry.h"

#include <algorithm>

#include "core/error.h"

namespace dtr {

OpCost OpDef::estimate(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                       const Attrs& attrs) const {
  OpCost c;
  if (cost != nullptr) {
    c = cost(in, out, attrs);
  } else {
    for (const auto& m : in) c.bytes += double(m.numel() * itemsize(m.dtype));
    for (const auto& m : out) {
      c.bytes += double(m.numel() * itemsize(m.dtype));
      c.flops += double(m.numel());
    }
  }
  if (scalar_flops_per_element > 0) {
    int64_t n = in.empty() ? 0 : in[0].numel();
    if (!out.empty()) n = std::max(n, out[0].numel());
    c.scalar_flops += scalar_flops_per_element * double(n);
  }
  return c;
}

OpRegistry& OpRegistry::instance() {
  static OpRegistry registry;
  return registry;
}

OpDef& OpRegistry::define(OpDef def) {
  DTR_INTERNAL_ASSERT(find(def.name) == nullptr, "op '{}' defined twice", def.name);
  def.id = int32_t(ops_.size());
  ops_.push_back(std::make_unique<OpDef>(std::move(def)));
  return *ops_.back();
}

void OpRegistry::set_kernel(std::string_view name, DeviceType device, KernelFn fn) {
  for (auto& op : ops_) {
    if (op->name == name) {
      op->kernels[size_t(device)] = fn;
      return;
    }
  }
  DTR_INTERNAL_ASSERT(false, "kernel registered for unknown op '{}'", name);
}

void OpRegistry::truncate(size_t size) {
  if (size < ops_.size()) ops_.resize(size);
}

const OpDef* OpRegistry::find(std::string_view name) const {
  for (const auto& op : ops_)
    if (op->name == name) return op.get();
  return nullptr;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  const OpDef* op = find(name);
  DTR_INTERNAL_ASSERT(op != nullptr, "unknown op '{}'", name);
  return *op;
}

}  // namespace dtr
