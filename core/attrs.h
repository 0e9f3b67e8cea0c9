// Op attributes: a small named list of values, recorded in lineage and
// replayed verbatim (Note [replay equals original]). Keys are owned copies
// held inline (AttrKey), so attributes built from run-time strings
// (bindings) stay valid, and building, copying or moving them on the op
// path allocates nothing and copies a few words (a std::string key cost a
// tiny op ~300 instructions more than a string_view did; AttrKey keeps it
// to what a string_view cost).
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

/// An attribute name: an owned copy of at most kMaxSize bytes, stored inline
/// (trivially copyable). Building one from a longer name throws ValueError
/// naming it: no op declares a parameter name that long.
class AttrKey {
 public:
  static constexpr size_t kMaxSize = 31;
  AttrKey() = default;
  AttrKey(std::string_view name) {  // NOLINT: implicit, like the string_view it copies
    if (name.size() > kMaxSize) [[unlikely]] too_long(name);
    size_ = uint8_t(name.size());
    for (size_t i = 0; i < name.size(); ++i) data_[i] = name[i];
  }
  std::string_view view() const { return {data_, size_}; }
  operator std::string_view() const { return view(); }  // NOLINT
  size_t size() const { return size_; }
  friend bool operator==(const AttrKey& a, const AttrKey& b) { return a.view() == b.view(); }
  friend bool operator==(const AttrKey& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const AttrKey& a, const std::string& b) { return a.view() == b; }
  friend bool operator==(const AttrKey& a, const char* b) { return a.view() == b; }

 private:
  [[noreturn]] static void too_long(std::string_view name);
  char data_[kMaxSize] = {};
  uint8_t size_ = 0;
};

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string_view, AttrValue>> init) {
    for (const auto& [k, v] : init) items_.emplace_back(AttrKey(k), v);
  }
  /// Adds or replaces `key` (copied).
  Attrs& set(std::string_view key, AttrValue v) {
    for (auto& [k, val] : items_)
      if (k == key) {
        val = std::move(v);
        return *this;
      }
    items_.emplace_back(AttrKey(key), std::move(v));
    return *this;
  }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  int64_t i(std::string_view key) const { return get<int64_t>(key); }
  double f(std::string_view key) const { return get<double>(key); }
  bool b(std::string_view key) const { return get<bool>(key); }
  const Shape& ints(std::string_view key) const { return get<Shape>(key); }
  DType dtype(std::string_view key) const { return get<DType>(key); }
  int64_t i_or(std::string_view key, int64_t d) const { return get_or<int64_t>(key, d); }
  double f_or(std::string_view key, double d) const { return get_or<double>(key, d); }
  bool b_or(std::string_view key, bool d) const { return get_or<bool>(key, d); }
  const auto& items() const { return items_; }
  std::string str() const;

 private:
  const AttrValue* find(std::string_view key) const {
    for (const auto& [k, v] : items_)
      if (k == key) return &v;
    return nullptr;
  }
  // A getter's errors are the caller's: attributes built by hand reach the
  // kernels unchecked while OpRegistry's checking is off (the default), so
  // a missing one is a ValueError and one of another type a TypeError (as
  // OpDef::check_attrs would have said), not an InternalError.
  template <typename T>
  const T& get(std::string_view key) const {
    const AttrValue* v = find(key);
    if (v == nullptr) [[unlikely]] missing(key);
    return checked<T>(key, *v);
  }
  template <typename T>
  T get_or(std::string_view key, T d) const {
    const AttrValue* v = find(key);
    return v ? checked<T>(key, *v) : d;
  }
  template <typename T>
  static const T& checked(std::string_view key, const AttrValue& v) {
    if (!std::holds_alternative<T>(v)) [[unlikely]] wrong_type(key, AttrValue(T{}).index(), v.index());
    return std::get<T>(v);
  }
  [[noreturn]] static void missing(std::string_view key);
  [[noreturn]] static void wrong_type(std::string_view key, size_t expected, size_t actual);
  absl::InlinedVector<std::pair<AttrKey, AttrValue>, 4> items_;
};

}  // namespace dtr

template <>
struct fmt::formatter<dtr::AttrKey> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const dtr::AttrKey& k, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(k.view(), ctx);
  }
};
