// dtr::nn::Module: the base of every layer, with torch.nn.Module semantics —
// named parameters, buffers and child modules, recursive dotted names
// ("layer.0.weight"), state_dict / load_state_dict, train / eval and
// zero_grad. Parameters are leaves that require grad; requires_grad_ makes
// their storages constants of the remat runtime, so parameters are never
// evicted (Note [what may be evicted]).
//
// Modules are written as in libtorch: an `XImpl` class registers what it
// owns in its constructor and keeps handles to it as members, and
// TORCH_MODULE(X) declares the holder `X` used everywhere else
// (eager/nn/holder.h):
//
//   struct BlockImpl : torch::nn::Module {
//     BlockImpl() : fc(register_module("fc", torch::nn::Linear(4, 4))) {}
//     torch::Tensor forward(torch::Tensor x) { return torch::relu(fc(x)); }
//     torch::nn::Linear fc;
//   };
//   TORCH_MODULE(Block);
//
//   Block block;                                  // a BlockImpl, shared by copies
//   torch::nn::Sequential seq(Block(), torch::nn::ReLU());
//
// (`namespace torch = dtr;` makes these the dtr names.) A module used
// without a holder lives in a shared_ptr: `auto m = std::make_shared<Net>();`.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eager/nn/holder.h"
#include "eager/nn/ordered_dict.h"
#include "eager/nn/state_dict.h"
#include "eager/tensor.h"

namespace dtr::nn {

/// (dotted name, tensor) items in registration order; see ordered_dict.h.
using NamedTensors = OrderedDict<std::string, Tensor>;

class Module;
/// (dotted name, module) items (libtorch's named_modules() result).
using NamedModules = OrderedDict<std::string, std::shared_ptr<Module>>;

class Module : public std::enable_shared_from_this<Module> {
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
  /// Registers a child; its parameters appear as "name.<param>". Returns
  /// the module, so a holder member can be set from it (libtorch):
  ///   fc1 = register_module("fc1", torch::nn::Linear(784, 64));
  /// Throws ValueError for a bad or taken name or a null module.
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }
  /// Registers the holder's module (ValueError for an empty holder).
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, const ModuleHolder<M>& holder) {
    return register_module(std::move(name), holder.ptr());
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
  /// Direct children in registration order (torch.nn.Module.named_children).
  const NamedModules& named_children() const { return children_; }
  std::vector<std::shared_ptr<Module>> children() const { return children_.values(); }
  /// This module (named `prefix`, when `include_self`) and every descendant,
  /// depth first in registration order, each module once under its first
  /// name ("fc1", "block.0", ...), as torch.nn.Module.named_modules. A name
  /// is `prefix` + "." + the dotted path (no dot when prefix is empty).
  /// include_self needs this module to live in a shared_ptr (a holder or
  /// make_shared); ValueError otherwise.
  NamedModules named_modules(const std::string& prefix = "", bool include_self = true);
  /// The modules of named_modules, without names.
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  /// Calls `fn` on this module and every descendant, each once, in the order
  /// of named_modules (torch.nn.Module.apply, libtorch's Module::apply).
  void apply(const std::function<void(Module&)>& fn);
  /// As apply, with each module's dotted name (this module's is `prefix`).
  void apply(const std::function<void(const std::string&, Module&)>& fn,
             const std::string& prefix = "");
  /// As apply, with each module's shared_ptr (needs a shared_ptr-owned root).
  void apply(const std::function<void(const std::shared_ptr<Module>&)>& fn);

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
  /// shared_from_this, or ValueError naming `what` when not shared_ptr-owned.
  std::shared_ptr<Module> self_ptr(const char* what);
  void collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const;
  /// Moves to `device` and/or casts floating tensors to `dtype` (see to()).
  void apply_to(std::optional<Device> device, std::optional<DType> dtype);

  std::string name_;
  bool training_ = true;
  NamedTensors parameters_;
  NamedTensors buffers_;
  NamedModules children_;
};

/// A module whose forward takes and returns one tensor, overridable: the
/// base of dtr's built-in layers, so code can hold any of them as a
/// shared_ptr<UnaryModule>. User modules need not derive from it: any module
/// with a `forward(Tensor)` goes into a Sequential (see AnyModule).
class UnaryModule : public Module {
 public:
  using Module::Module;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

namespace detail {
/// True for a Module subclass whose forward takes one Tensor and returns
/// something convertible to a Tensor.
template <typename M>
concept TensorForward = std::is_base_of_v<Module, M> && requires(M& m, const Tensor& x) {
  { m.forward(x) } -> std::convertible_to<Tensor>;
};
/// The module type a container argument carries: M for an M value, a
/// shared_ptr<M> or a ModuleHolder<M> (or a TORCH_MODULE class).
template <typename A>
struct module_arg {
  using type = std::remove_cvref_t<A>;  // a module value
};
template <typename M>
struct module_arg<std::shared_ptr<M>> {
  using type = M;
};
template <typename A>
  requires is_module_holder_v<A>
struct module_arg<A> {
  using type = typename std::remove_cvref_t<A>::ContainedType;
};
template <typename A>
using module_arg_t = typename module_arg<std::remove_cvref_t<A>>::type;
/// True for what the containers take: a module value (moved in), a
/// shared_ptr to a module, or a holder.
template <typename A>
inline constexpr bool is_module_arg_v = std::is_base_of_v<Module, module_arg_t<A>>;
/// The shared_ptr a container keeps for argument `a`.
template <typename A>
std::shared_ptr<module_arg_t<A>> module_ptr(A&& a) {
  using D = std::remove_cvref_t<A>;
  using M = module_arg_t<A>;
  if constexpr (is_module_holder_v<D>) {
    return a.ptr();
  } else if constexpr (std::is_same_v<D, std::shared_ptr<M>>) {
    DTR_CHECK(a != nullptr, ValueError, "a null module cannot be added to a container");
    return a;
  } else {
    static_assert(!std::is_lvalue_reference_v<A>,
                  "modules are not copyable: std::move the module, or pass a holder or shared_ptr");
    return std::make_shared<M>(std::move(a));
  }
}
}  // namespace detail

/// Any module whose forward takes one Tensor, type-erased (libtorch's
/// AnyModule, for one Tensor argument): what Sequential holds. Copies share
/// the module.
class AnyModule {
 public:
  AnyModule() = default;
  /// From a holder, a shared_ptr or a module value (moved in).
  template <typename A, typename = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<A>, AnyModule> &&
                                                    detail::is_module_arg_v<A>>>
  explicit AnyModule(A&& a) {
    using M = detail::module_arg_t<A>;
    static_assert(detail::TensorForward<M>,
                  "a Sequential holds modules with a forward(Tensor) returning a Tensor");
    auto p = detail::module_ptr(std::forward<A>(a));
    M* raw = p.get();
    forward_ = [raw](const Tensor& x) -> Tensor { return raw->forward(x); };
    module_ = std::move(p);
  }
  /// Runs the module's forward; ValueError when empty.
  Tensor forward(const Tensor& x) const;
  bool is_empty() const noexcept { return module_ == nullptr; }
  /// The module (null when empty).
  const std::shared_ptr<Module>& ptr() const noexcept { return module_; }
  /// The module as a T; TypeError when it is not a T.
  template <typename T>
  std::shared_ptr<T> ptr() const {
    auto p = std::dynamic_pointer_cast<T>(module_);
    DTR_CHECK(p != nullptr, TypeError, "AnyModule: the module is {}, not the type asked for",
              module_ ? module_->name() : "empty");
    return p;
  }
  template <typename T>
  T& get() const {
    return *ptr<T>();
  }

 private:
  std::shared_ptr<Module> module_;
  std::function<Tensor(const Tensor&)> forward_;
};

/// A (name, module) pair for building a Sequential with named children
/// (libtorch's NamedAnyModule): `Sequential({{"fc", Linear(4, 4)}, {"act", ReLU()}})`.
struct NamedAnyModule {
  template <typename A, typename = std::enable_if_t<detail::is_module_arg_v<A>>>
  NamedAnyModule(std::string n, A&& a) : name(std::move(n)), module(std::forward<A>(a)) {}
  std::string name;
  AnyModule module;
};

/// Applies its children in order (torch.nn.Sequential); they are named
/// "0", "1", ... (or as given) in the state_dict. Built from holders,
/// module values or shared_ptrs, of any module with forward(Tensor):
///
///   nn::Sequential seq(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 1));
///   seq->push_back(nn::Linear(1, 1));
///   seq->push_back("act", std::make_shared<MyModule>());
class SequentialImpl : public UnaryModule {
 public:
  SequentialImpl() : UnaryModule("Sequential") {}
  /// Children named as given.
  SequentialImpl(std::initializer_list<NamedAnyModule> named);
  /// One child per argument.
  template <typename M, typename... Ms,
            typename = std::enable_if_t<
                !(sizeof...(Ms) == 0 && std::is_same_v<std::remove_cvref_t<M>, SequentialImpl>) &&
                detail::is_module_arg_v<M> && (detail::is_module_arg_v<Ms> && ...)>>
  explicit SequentialImpl(M&& first, Ms&&... rest) : UnaryModule("Sequential") {
    push_back(std::forward<M>(first));
    (push_back(std::forward<Ms>(rest)), ...);
  }
  /// Appends a module under the next index.
  template <typename A, typename = std::enable_if_t<detail::is_module_arg_v<A> ||
                                                    std::is_same_v<std::remove_cvref_t<A>, AnyModule>>>
  void push_back(A&& a) {
    push_back(std::to_string(modules_.size()), std::forward<A>(a));
  }
  /// Appends a module under `name` (ValueError for a bad or taken name).
  template <typename A, typename = std::enable_if_t<detail::is_module_arg_v<A> ||
                                                    std::is_same_v<std::remove_cvref_t<A>, AnyModule>>>
  void push_back(std::string name, A&& a) {
    if constexpr (std::is_same_v<std::remove_cvref_t<A>, AnyModule>) {
      push_back_any(std::move(name), a);
    } else {
      push_back_any(std::move(name), AnyModule(std::forward<A>(a)));
    }
  }
  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  /// The i-th module (libtorch's Sequential::operator[] / ptr(i)); IndexError
  /// when out of range.
  std::shared_ptr<Module> operator[](size_t i) const { return ptr(i); }
  std::shared_ptr<Module> ptr(size_t i) const { return at_any(i).ptr(); }
  /// The i-th module as a T; IndexError when out of range, TypeError when it
  /// is not a T.
  template <typename T>
  std::shared_ptr<T> ptr(size_t i) const {
    return at_any(i).template ptr<T>();
  }
  template <typename T>
  T& at(size_t i) const {
    return *ptr<T>(i);
  }
  /// The type-erased modules, in order.
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }
  Tensor forward(const Tensor& x) override;

 private:
  void push_back_any(std::string name, AnyModule m);
  const AnyModule& at_any(size_t i) const;
  std::vector<AnyModule> modules_;
};

/// The holder of a SequentialImpl; also takes a list of named modules.
class Sequential : public ModuleHolder<SequentialImpl> {
 public:
  using ModuleHolder<SequentialImpl>::ModuleHolder;
  Sequential() : ModuleHolder<SequentialImpl>() {}
  Sequential(std::initializer_list<NamedAnyModule> named)
      : ModuleHolder<SequentialImpl>(std::make_shared<SequentialImpl>(named)) {}
};

/// Holds modules in a list (torch.nn.ModuleList): children named "0", "1",
/// ..., registered so their parameters appear as "0.weight", ...; no forward.
/// Accepts holders, module values (moved in) or shared_ptrs, of any module.
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <typename... Ms, typename = std::enable_if_t<(sizeof...(Ms) > 0) &&
                                                        (detail::is_module_arg_v<Ms> && ...) &&
                                                        !(sizeof...(Ms) == 1 &&
                                                          (std::is_same_v<std::remove_cvref_t<Ms>, ModuleListImpl> && ...))>>
  explicit ModuleListImpl(Ms&&... modules) : Module("ModuleList") {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  /// Appends a module under the next index (ModuleList.append).
  template <typename A, typename = std::enable_if_t<detail::is_module_arg_v<A>>>
  void push_back(A&& a) {
    push_back_ptr(detail::module_ptr(std::forward<A>(a)));
  }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  bool is_empty() const { return modules_.empty(); }
  /// The i-th module; throws IndexError when out of range.
  const std::shared_ptr<Module>& operator[](size_t i) const;
  const std::shared_ptr<Module>& ptr(size_t i) const { return (*this)[i]; }
  /// The i-th module as a T (libtorch's ModuleList::ptr<T>); throws
  /// IndexError when out of range, TypeError when it is not a T.
  template <typename T>
  std::shared_ptr<T> ptr(size_t i) const {
    auto p = std::dynamic_pointer_cast<T>((*this)[i]);
    DTR_CHECK(p != nullptr, TypeError, "ModuleList: module {} is a {}, not the type asked for", i,
              (*this)[i]->name());
    return p;
  }
  template <typename T>
  T& at(size_t i) const {
    return *ptr<T>(i);
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  void push_back_ptr(std::shared_ptr<Module> m);
  std::vector<std::shared_ptr<Module>> modules_;
};
DTR_MODULE(ModuleList);

}  // namespace dtr::nn
