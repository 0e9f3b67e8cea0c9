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

#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
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
  /// Modules are movable, so a layer can be built as a value and handed to a
  /// container (`Sequential(Linear(8, 16), ReLU())`): the parameters,
  /// buffers and children move with their handles (no module keeps a pointer
  /// to itself). A moved-from module is empty.
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

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
  /// each child's (torch.nn.Module.named_parameters). With
  /// `remove_duplicate` (PyTorch's default) a tensor registered under several
  /// names (tied weights, a child registered twice) appears once, under its
  /// first name; so an optimizer can be given parameters() directly.
  NamedTensors named_parameters(bool recurse = true, bool remove_duplicate = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// As named_parameters, for the buffers.
  NamedTensors named_buffers(bool recurse = true, bool remove_duplicate = true) const;
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
  /// Casts every floating parameter and buffer (and a defined .grad of a
  /// floating parameter) to the floating dtype `dtype` in place, as
  /// torch.nn.Module.to(dtype): integer and bool tensors (BatchNorm's
  /// num_batches_tracked) are left alone. Same in-place rules as to(device):
  /// every handle sees the cast, nothing changes on error, tied tensors are
  /// cast once. Throws TypeError when `dtype` is not floating (PyTorch:
  /// "nn.Module.to only accepts floating point or complex dtypes").
  void to(DType dtype);
  /// to(device) and to(dtype) in one pass (torch.nn.Module.to(device, dtype)).
  void to(Device device, DType dtype);
  void to(DeviceType device) { to(Device(device)); }

 protected:
  void add_child(std::string name, std::shared_ptr<Module> module);

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const;
  /// Moves to `device` and/or casts floating tensors to `dtype` (see to()).
  void apply_to(std::optional<Device> device, std::optional<DType> dtype);

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

namespace detail {
/// A module value (moved into a new shared_ptr) or a shared_ptr to one, as
/// the containers accept them (libtorch's module holders).
template <typename Base, typename M>
std::shared_ptr<Base> module_ptr(M&& m) {
  using D = std::remove_cvref_t<M>;
  if constexpr (std::is_base_of_v<Base, D>) {
    static_assert(!std::is_lvalue_reference_v<M>,
                  "modules are not copyable: std::move the module or pass a shared_ptr");
    return std::make_shared<D>(std::forward<M>(m));
  } else {
    return std::shared_ptr<Base>(std::forward<M>(m));
  }
}
/// True for a module derived from Base, or a shared_ptr to one.
template <typename Base, typename M>
inline constexpr bool is_module_arg_v =
    std::is_base_of_v<Base, std::remove_cvref_t<M>> ||
    std::is_convertible_v<std::remove_cvref_t<M>, std::shared_ptr<Base>>;
}  // namespace detail

/// Applies its children in order (torch.nn.Sequential); they are named
/// "0", "1", ... in the state_dict. Built from module values or shared_ptrs:
///
///   nn::Sequential seq(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 1));
///   seq.push_back(nn::Linear(1, 1));               // a value: moved in
///   seq.push_back(std::make_shared<nn::ReLU>());  // a shared_ptr: shared
class Sequential : public UnaryModule {
 public:
  Sequential() : UnaryModule("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules);
  /// One child per argument, each a UnaryModule value or a shared_ptr to one.
  template <typename M, typename... Ms,
            typename = std::enable_if_t<
                !(sizeof...(Ms) == 0 && std::is_same_v<std::remove_cvref_t<M>, Sequential>) &&
                detail::is_module_arg_v<UnaryModule, M> &&
                (detail::is_module_arg_v<UnaryModule, Ms> && ...)>>
  explicit Sequential(M&& first, Ms&&... rest) : UnaryModule("Sequential") {
    push_back(std::forward<M>(first));
    (push_back(std::forward<Ms>(rest)), ...);
  }
  /// Appends `m` under the next index.
  void push_back(std::shared_ptr<UnaryModule> m);
  /// Appends a module value (moved into a shared_ptr) under the next index.
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<UnaryModule, std::remove_cvref_t<M>>>>
  void push_back(M&& m) {
    push_back(detail::module_ptr<UnaryModule>(std::forward<M>(m)));
  }
  size_t size() const { return layers_.size(); }
  /// The i-th layer; throws IndexError when out of range.
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const;
  auto begin() const { return layers_.begin(); }
  auto end() const { return layers_.end(); }
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

/// Holds modules in a list (torch.nn.ModuleList): children named "0", "1",
/// ..., registered so their parameters appear as "0.weight", ...; no forward.
/// Accepts module values (moved in) or shared_ptrs, like Sequential.
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  template <typename... Ms, typename = std::enable_if_t<(sizeof...(Ms) > 0) &&
                                                        (detail::is_module_arg_v<Module, Ms> && ...) &&
                                                        !(sizeof...(Ms) == 1 &&
                                                          (std::is_same_v<std::remove_cvref_t<Ms>, ModuleList> && ...))>>
  explicit ModuleList(Ms&&... modules) : Module("ModuleList") {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  /// Appends `m` under the next index (ModuleList.append).
  void push_back(std::shared_ptr<Module> m);
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<Module, std::remove_cvref_t<M>>>>
  void push_back(M&& m) {
    push_back(detail::module_ptr<Module>(std::forward<M>(m)));
  }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  /// The i-th module; throws IndexError when out of range.
  const std::shared_ptr<Module>& operator[](size_t i) const;
  /// The i-th module as a T (libtorch's ModuleList::ptr<T>); throws
  /// IndexError when out of range, TypeError when it is not a T.
  template <typename T>
  std::shared_ptr<T> ptr(size_t i) const {
    auto p = std::dynamic_pointer_cast<T>((*this)[i]);
    DTR_CHECK(p != nullptr, TypeError, "ModuleList: module {} is a {}, not the type asked for", i,
              (*this)[i]->name());
    return p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace dtr::nn
