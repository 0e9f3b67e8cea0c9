// dtr::nn::Module: the base of every layer, with torch.nn.Module semantics —
// named parameters, buffers and child modules, recursive dotted names
// ("layer.0.weight"), state_dict / load_state_dict, train / eval and
// zero_grad. Parameters are leaves that require grad; requires_grad_ makes
// their storages constants of the remat runtime, so parameters are never
// evicted (Note [what may be evicted]).
//
// A layer registers what it owns in its constructor and keeps handles to it
// as public members, like libtorch:
//
//   struct Block : dtr::nn::UnaryModule {
//     std::shared_ptr<dtr::nn::Linear> fc;
//     Block() { fc = register_module("fc", std::make_shared<dtr::nn::Linear>(4, 4)); }
//     dtr::Tensor forward(const dtr::Tensor& x) override { return dtr::relu(fc->forward(x)); }
//   };
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eager/nn/state_dict.h"
#include "eager/tensor.h"

namespace dtr::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The layer's type name ("Linear"), used in messages.
  const std::string& name() const { return name_; }

  // ---- registration ---------------------------------------------------------
  /// Registers `t` as a parameter: a leaf that requires grad (when
  /// `requires_grad`). An undefined tensor registers nothing (like a None
  /// parameter). Returns the handle to keep as a member. Throws ValueError
  /// for an empty or dotted name or a name already in use, TypeError for a
  /// non-floating tensor that should require grad.
  Tensor register_parameter(std::string name, Tensor t, bool requires_grad = true);
  /// Registers a buffer (running statistics, counters): saved in the
  /// state_dict, never trained. Same name rules as register_parameter.
  Tensor register_buffer(std::string name, Tensor t);
  /// Registers a child; its parameters appear as "name.<param>".
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

  // ---- traversal --------------------------------------------------------------
  /// (dotted name, parameter) in registration order, own ones first, then
  /// each child's (torch.nn.Module.named_parameters).
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Direct children in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }

  // ---- state ------------------------------------------------------------------
  /// Parameters and buffers by dotted name, in the order of
  /// torch.nn.Module.state_dict (per module: parameters, buffers, then
  /// children). The tensors are detached handles sharing the module's storage.
  StateDict state_dict() const;
  /// Copies `state` into the parameters and buffers in place (under
  /// NoGradGuard, casting dtypes like Tensor.copy_). With `strict`, throws
  /// ValueError naming every missing and unexpected key; a shape mismatch
  /// always throws ValueError naming the key and both shapes. Nothing is
  /// written unless every check passes.
  void load_state_dict(const StateDict& state, bool strict = true);

  // ---- modes ------------------------------------------------------------------
  /// Sets training mode on this module and every descendant (Module.train).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Sets every parameter's grad to undefined (zero_grad(set_to_none=True)).
  void zero_grad();

 protected:
  void add_child(std::string name, std::shared_ptr<Module> module);

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const;

  std::string name_;
  bool training_ = true;
  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// A module whose forward takes and returns one tensor; what Sequential holds.
class UnaryModule : public Module {
 public:
  using Module::Module;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

/// Applies its children in order (torch.nn.Sequential); they are named
/// "0", "1", ... in the state_dict.
class Sequential : public UnaryModule {
 public:
  Sequential() : UnaryModule("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules);
  /// Appends `m` under the next index.
  void push_back(std::shared_ptr<UnaryModule> m);
  size_t size() const { return layers_.size(); }
  /// The i-th layer; throws IndexError when out of range.
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const;
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

}  // namespace dtr::nn
