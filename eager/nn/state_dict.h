// StateDict: an insertion-ordered map from dotted names ("layer.0.weight")
// to tensors, like the OrderedDict returned by torch.nn.Module.state_dict().
// Modules, optimizers and safetensors files all speak it.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "eager/tensor.h"

namespace dtr {

class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  StateDict() = default;
  StateDict(std::initializer_list<Item> items) {
    for (const auto& [k, v] : items) insert(k, v);
  }

  /// Adds `name` at the end, or replaces its tensor in place (keeping its
  /// position) when the name exists, like OrderedDict assignment.
  void insert(std::string name, Tensor t) {
    if (auto it = index_.find(name); it != index_.end()) {
      items_[it->second].second = std::move(t);
      return;
    }
    index_.emplace(name, items_.size());
    items_.emplace_back(std::move(name), std::move(t));
  }
  bool contains(std::string_view name) const { return index_.count(std::string(name)) != 0; }
  /// Null when absent.
  const Tensor* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  /// Throws IndexError naming the key when absent (Python's KeyError).
  const Tensor& at(std::string_view name) const {
    const Tensor* t = find(name);
    DTR_CHECK(t != nullptr, IndexError, "StateDict: no entry named '{}'", name);
    return *t;
  }
  /// Removes `name`; returns whether it was present.
  bool erase(std::string_view name) {
    auto it = index_.find(std::string(name));
    if (it == index_.end()) return false;
    items_.erase(items_.begin() + std::ptrdiff_t(it->second));
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
    return true;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    k.reserve(items_.size());
    for (const auto& [name, t] : items_) k.push_back(name);
    return k;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace dtr
