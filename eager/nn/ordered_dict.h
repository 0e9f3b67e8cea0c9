// dtr::OrderedDict<Key, Value>: what libtorch's named_parameters(),
// named_buffers(), named_modules() and named_children() return — (key,
// value) items in insertion order. An item has key()/value() (libtorch) and
// is a std::pair (first/second, structured bindings), so both
//
//   for (auto& p : net->named_parameters()) use(p.key(), p.value());
//   for (auto& [name, t] : net->named_parameters()) use(name, t);
//
// work. Lookup by key is linear (these lists are short).
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"

namespace dtr {

template <typename Key, typename Value>
class OrderedDict {
 public:
  /// One (key, value) entry.
  struct Item : std::pair<Key, Value> {
    using std::pair<Key, Value>::pair;
    const Key& key() const noexcept { return this->first; }
    Value& value() noexcept { return this->second; }
    const Value& value() const noexcept { return this->second; }
    std::pair<Key, Value>& pair() noexcept { return *this; }
  };

  OrderedDict() = default;
  size_t size() const noexcept { return items_.size(); }
  bool is_empty() const noexcept { return items_.empty(); }
  bool empty() const noexcept { return items_.empty(); }
  auto begin() noexcept { return items_.begin(); }
  auto end() noexcept { return items_.end(); }
  auto begin() const noexcept { return items_.begin(); }
  auto end() const noexcept { return items_.end(); }
  Item& front() { return items_.front(); }
  Item& back() { return items_.back(); }
  const Item& front() const { return items_.front(); }
  const Item& back() const { return items_.back(); }
  const std::vector<Item>& items() const noexcept { return items_; }

  /// Appends (key, value); keys are not checked for uniqueness here (the
  /// module registers its names after checking them).
  template <typename... Args>
  Item& emplace_back(Args&&... args) {
    return items_.emplace_back(std::forward<Args>(args)...);
  }
  void push_back(Item item) { items_.push_back(std::move(item)); }

  /// The i-th item; IndexError when out of range.
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  Item& operator[](I i) {
    return items_.at(checked(size_t(i)));
  }
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  const Item& operator[](I i) const {
    return items_.at(checked(size_t(i)));
  }
  /// The value under `key`; IndexError naming the key when absent.
  Value& operator[](const Key& key) { return *must_find(key); }
  const Value& operator[](const Key& key) const { return *must_find(key); }
  Value& operator[](const char* key) { return *must_find(Key(key)); }
  const Value& operator[](const char* key) const { return *must_find(Key(key)); }
  /// The value under `key`, or nullptr (libtorch's OrderedDict::find).
  Value* find(const Key& key) noexcept {
    for (auto& it : items_)
      if (it.first == key) return &it.second;
    return nullptr;
  }
  const Value* find(const Key& key) const noexcept {
    for (auto& it : items_)
      if (it.first == key) return &it.second;
    return nullptr;
  }
  bool contains(const Key& key) const noexcept { return find(key) != nullptr; }
  std::vector<Key> keys() const {
    std::vector<Key> out;
    for (auto& it : items_) out.push_back(it.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    for (auto& it : items_) out.push_back(it.second);
    return out;
  }

 private:
  size_t checked(size_t i) const {
    DTR_CHECK(i < items_.size(), IndexError, "OrderedDict: index {} is out of range for {} items", i,
              items_.size());
    return i;
  }
  template <typename K>
  auto* must_find(const K& key) const {
    auto* v = const_cast<OrderedDict*>(this)->find(key);
    DTR_CHECK(v != nullptr, IndexError, "OrderedDict: key '{}' is not present", key);
    return v;
  }
  std::vector<Item> items_;
};

}  // namespace dtr
