#include "core/op_registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/absl_compat.h"
#include "core/error.h"

namespace dtr {

std::string_view param_type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt: return "int";
    case ParamType::kFloat: return "float";
    case ParamType::kBool: return "bool";
    case ParamType::kInts: return "ints";
    case ParamType::kDType: return "dtype";
  }
  return "?";
}

namespace param {
namespace {
ParamSpec spec(std::string name, ParamType type) { return ParamSpec{std::move(name), type}; }
ParamSpec with_default(std::string name, AttrValue v) {
  ParamSpec p{std::move(name), param_type_of(v)};
  p.default_value = std::move(v);
  return p;
}
}  // namespace
ParamSpec i(std::string name) { return spec(std::move(name), ParamType::kInt); }
ParamSpec i(std::string name, int64_t d) { return with_default(std::move(name), d); }
ParamSpec f(std::string name) { return spec(std::move(name), ParamType::kFloat); }
ParamSpec f(std::string name, double d) { return with_default(std::move(name), d); }
ParamSpec b(std::string name) { return spec(std::move(name), ParamType::kBool); }
ParamSpec b(std::string name, bool d) { return with_default(std::move(name), d); }
ParamSpec ints(std::string name) { return spec(std::move(name), ParamType::kInts); }
ParamSpec dtype(std::string name) { return spec(std::move(name), ParamType::kDType); }
ParamSpec optional(ParamSpec p) {
  p.required = false;
  return p;
}
}  // namespace param

std::string OpDef::params_str() const {
  if (params.empty()) return "none";
  std::string out;
  for (const ParamSpec& p : params) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", p.name, param_type_name(p.type));
  }
  return out;
}

void OpDef::check_attrs(const Attrs& attrs) const {
  for (const auto& [key, value] : attrs.items()) {
    // By name, not [&]: clang before 16 cannot capture a structured binding.
    const auto spec = std::find_if(params.begin(), params.end(),
                                   [&key = key](const ParamSpec& p) { return p.name == key; });
    DTR_CHECK(spec != params.end(), ValueError,
              "{}: unknown attribute '{}'; the op's parameters are: {}", name, key, params_str());
    DTR_CHECK(param_type_of(value) == spec->type, TypeError,
              "{}: parameter '{}' expects a value of type {}, got {}", name, key,
              param_type_name(spec->type), param_type_name(param_type_of(value)));
  }
  for (const ParamSpec& p : params) {
    DTR_CHECK(!p.required || attrs.has(p.name), ValueError,
              "{}: missing required parameter '{}' ({}); the op's parameters are: {}", name,
              p.name, param_type_name(p.type), params_str());
  }
}

Attrs OpDef::make_attrs(std::span<const std::pair<std::string, AttrValue>> values) const {
  Attrs attrs;
  for (const auto& [key, value] : values) {
    DTR_CHECK(!attrs.has(key), ValueError, "{}: parameter '{}' given twice", name, key);
    attrs.set(key, value);
  }
  for (const ParamSpec& p : params) {
    if (p.default_value.has_value() && !attrs.has(p.name)) attrs.set(p.name, *p.default_value);
  }
  check_attrs(attrs);
  return attrs;
}

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
  for (size_t i = 0; i < def.params.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      DTR_INTERNAL_ASSERT(def.params[i].name != def.params[j].name, "op '{}' declares '{}' twice",
                          def.name, def.params[i].name);
    }
  }
  def.id = int32_t(ops_.size());
  ops_.push_back(std::make_unique<OpDef>(std::move(def)));
  by_name_.emplace(ops_.back()->name, ops_.back().get());
  return *ops_.back();
}

void OpRegistry::set_kernel(std::string_view name, DeviceType device, KernelFn fn) {
  const auto it = by_name_.find(to_absl(name));
  DTR_INTERNAL_ASSERT(it != by_name_.end(), "kernel registered for unknown op '{}'", name);
  DTR_INTERNAL_ASSERT(it->second->kind != OpKind::kComposite,
                      "kernel registered for the composite op '{}'", name);
  it->second->kernels[size_t(device)] = fn;
}

void OpRegistry::truncate(size_t size) {
  for (size_t i = size; i < ops_.size(); ++i) by_name_.erase(ops_[i]->name);
  if (size < ops_.size()) ops_.resize(size);
}

const OpDef* OpRegistry::find(std::string_view name) const {
  const auto it = by_name_.find(to_absl(name));
  return it == by_name_.end() ? nullptr : it->second;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  const OpDef* op = find(name);
  DTR_CHECK(op != nullptr, ValueError, "unknown op '{}' ({} ops are registered; dtr::op and "
            "OpRegistry::get take registry names such as \"add\" or \"matmul\")",
            name, ops_.size());
  return *op;
}

void OpDef::throw_input_count(size_t n) const {
  const std::string expected =
      min_inputs == max_inputs ? fmt::format("{}", min_inputs)
      : max_inputs < 0         ? fmt::format("at least {}", min_inputs)
                               : fmt::format("{} to {}", min_inputs, max_inputs);
  throw ValueError(fmt::format("{}: expected {} input{}, got {}", name, expected,
                               min_inputs == 1 && max_inputs == 1 ? "" : "s", n));
}

}  // namespace dtr
