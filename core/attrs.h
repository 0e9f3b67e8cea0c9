// Op attributes: a small named list of values, recorded in lineage and
// replayed verbatim (Note [replay equals original]). Keys are owned copies,
// so attributes built from run-time strings (bindings) stay valid; every key
// an op declares fits std::string's inline buffer (tests/core/
// op_registry_test.cpp checks), so building them allocates nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <absl/container/inlined_vector.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace dtr {

using AttrValue = std::variant<int64_t, double, bool, Shape, DType>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string_view, AttrValue>> init) {
    for (const auto& [k, v] : init) items_.emplace_back(std::string(k), v);
  }
  /// Adds or replaces `key` (copied).
  Attrs& set(std::string_view key, AttrValue v) {
    for (auto& [k, val] : items_)
      if (k == key) {
        val = std::move(v);
        return *this;
      }
    items_.emplace_back(std::string(key), std::move(v));
    return *this;
  }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  int64_t i(std::string_view key) const { return get<int64_t>(key); }
  double f(std::string_view key) const { return get<double>(key); }
  bool b(std::string_view key) const { return get<bool>(key); }
  const Shape& ints(std::string_view key) const { return get<Shape>(key); }
  DType dtype(std::string_view key) const { return get<DType>(key); }
  int64_t i_or(std::string_view key, int64_t d) const {
    const AttrValue* v = find(key);
    return v ? std::get<int64_t>(*v) : d;
  }
  double f_or(std::string_view key, double d) const {
    const AttrValue* v = find(key);
    return v ? std::get<double>(*v) : d;
  }
  bool b_or(std::string_view key, bool d) const {
    const AttrValue* v = find(key);
    return v ? std::get<bool>(*v) : d;
  }
  const auto& items() const { return items_; }
  std::string str() const;

 private:
  const AttrValue* find(std::string_view key) const {
    for (const auto& [k, v] : items_)
      if (k == key) return &v;
    return nullptr;
  }
  template <typename T>
  const T& get(std::string_view key) const {
    const AttrValue* v = find(key);
    DTR_INTERNAL_ASSERT(v != nullptr, "missing attribute '{}'", key);
    DTR_INTERNAL_ASSERT(std::holds_alternative<T>(*v), "attribute '{}' has another type", key);
    return std::get<T>(*v);
  }
  absl::InlinedVector<std::pair<std::string, AttrValue>, 4> items_;
};

}  // namespace dtr
