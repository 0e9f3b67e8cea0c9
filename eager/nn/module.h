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

  // ---- devices ------------------------------------------------------------------
  /// Moves every parameter and buffer of this module and its descendants to
  /// `device` (libtorch `module->to(device)`, torch.nn.Module.to(device)):
  /// each tensor's bytes are copied with Tensor::to(device) (the registry op
  /// "to_device", through the backends' copies) and the copy is put in place
  /// in the tensor's own TensorImpl, as libtorch's `param.set_data(...)`
  /// does. Every handle on it therefore sees the move: the members
  /// (`linear->weight`), tensors fetched from parameters() or buffers()
  /// before the call, and an optimizer built before it. Shapes and dtypes
  /// are unchanged; strides become contiguous; a parameter stays a leaf
  /// with its requires_grad. A defined .grad moves with its parameter (as
  /// torch.nn.Module.to does). Tensors on `device` already are left alone
  /// (moving a module to where it is is a no-op). A tensor registered under
  /// two names (tied weights) moves once and stays shared.
  ///
  /// The moved tensors are constants of the remat runtime on `device`
  /// (loaded data: never recomputed; with a host tier they may be swapped),
  /// and their old bytes are freed once nothing else holds them. Optimizer
  /// state made before the call (momentum, Adam moments after a step)
  /// stays where it was, so build optimizers after to(), as PyTorch advises.
  /// Do not call it between a forward pass and its backward: the graph
  /// recorded on the old device would send gradients there.
  ///
  /// Every copy is made before any tensor is changed, so a failure leaves
  /// the module as it was. Throws DeviceError when `device` does not exist
  /// (from the copy), OutOfMemoryError when the copies do not fit under
  /// `device`'s budget.
  void to(Device device);

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
