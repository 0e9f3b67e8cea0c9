// dtr::nn::ModuleHolder<Impl> and TORCH_MODULE: libtorch's module holders.
// A layer is written as `XImpl` (a Module subclass) and used through `X`, a
// holder sharing one XImpl:
//
//   struct NetImpl : torch::nn::Module {
//     NetImpl() : fc1(register_module("fc1", torch::nn::Linear(8, 4))) {}
//     torch::Tensor forward(torch::Tensor x) { return torch::relu(fc1(x)); }
//     torch::nn::Linear fc1;
//   };
//   TORCH_MODULE(Net);           // class Net : public ModuleHolder<NetImpl>
//
//   Net net;                     // default-constructs a NetImpl
//   torch::nn::Linear empty{nullptr};   // an empty holder, filled later
//   net->fc1->weight;            // -> reaches the Impl
//   Net copy = net;              // copies share the same NetImpl
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "core/error.h"

namespace dtr::nn {

template <typename Contained>
class ModuleHolder;

namespace detail {
template <typename T>
struct is_module_holder : std::false_type {};
template <typename C>
struct is_module_holder<ModuleHolder<C>> : std::true_type {};
/// True for ModuleHolder<C> and every class derived from one (TORCH_MODULE's).
template <typename T>
inline constexpr bool is_module_holder_v =
    requires(const std::remove_cvref_t<T>& t) { []<typename C>(const ModuleHolder<C>&) {}(t); };
}  // namespace detail

/// Shares one `Contained` module (libtorch's torch::nn::ModuleHolder).
/// Copies share the module; `nullptr` makes an empty holder; every access
/// to an empty holder (->, *, get(), ptr(), calling it) throws ValueError.
template <typename Contained>
class ModuleHolder {
 public:
  using ContainedType = Contained;

  /// Default-constructs a Contained; a compile error when it has no default
  /// constructor (write `X x{nullptr};` or `X x = nullptr;` for an empty one).
  ModuleHolder() : impl_(default_construct()) {}
  /// An empty holder.
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit like libtorch
  /// Constructs a Contained from the arguments (`Linear(784, 64)`,
  /// `Conv2d(Conv2dOptions(1, 10, 5))`).
  template <typename Head, typename... Tail,
            typename = std::enable_if_t<
                !(sizeof...(Tail) == 0 &&
                  (std::is_same_v<std::remove_cvref_t<Head>, std::nullptr_t> ||
                   std::is_base_of_v<ModuleHolder, std::remove_cvref_t<Head>> ||
                   std::is_convertible_v<Head, std::shared_ptr<Contained>>)) &&
                std::is_constructible_v<Contained, Head, Tail...>>>
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : impl_(std::make_shared<Contained>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}
  /// Holds `module` (which may be null: an empty holder).
  ModuleHolder(std::shared_ptr<Contained> module) : impl_(std::move(module)) {}  // NOLINT

  /// True when the holder holds a module.
  explicit operator bool() const noexcept { return !is_empty(); }
  bool is_empty() const noexcept { return impl_ == nullptr; }

  Contained* operator->() { return get(); }
  const Contained* operator->() const { return get(); }
  Contained& operator*() { return *get(); }
  const Contained& operator*() const { return *get(); }
  Contained* get() { return checked().get(); }
  const Contained* get() const { return checked().get(); }
  /// The shared module.
  const std::shared_ptr<Contained>& ptr() const { return checked(); }

  /// Calls the module's forward with `args` (`model(x)` for `model->forward(x)`).
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) {
    return get()->forward(std::forward<Args>(args)...);
  }
  /// Indexes the module (`seq[0]`, `list[1]`) where it can be indexed.
  template <typename Arg>
  decltype(auto) operator[](Arg&& arg) {
    return (*get())[std::forward<Arg>(arg)];
  }

 protected:
  std::shared_ptr<Contained> impl_;

 private:
  static std::shared_ptr<Contained> default_construct() {
    static_assert(std::is_default_constructible_v<Contained>,
                  "this module has no default constructor: give the holder constructor arguments, "
                  "or make it empty with `X x{nullptr};` / `X x = nullptr;`");
    if constexpr (std::is_default_constructible_v<Contained>) {
      return std::make_shared<Contained>();
    } else {
      return nullptr;
    }
  }
  const std::shared_ptr<Contained>& checked() const {
    DTR_CHECK(impl_ != nullptr, ValueError,
              "Accessing an empty module holder (of {}): it was made from nullptr and never "
              "assigned a module",
              typeid(Contained).name());
    return impl_;
  }
};

}  // namespace dtr::nn

/// Declares `Name`, a holder of `Impl` with Impl's constructors (libtorch's
/// TORCH_MODULE_IMPL).
#define DTR_MODULE_IMPL(Name, Impl)                                 \
  class Name : public ::dtr::nn::ModuleHolder<Impl> {               \
   public:                                                          \
    using ::dtr::nn::ModuleHolder<Impl>::ModuleHolder;              \
    using ::dtr::nn::ModuleHolder<Impl>::get;                       \
  }

/// Declares `Name`, a holder of `NameImpl` (libtorch's TORCH_MODULE).
#define DTR_MODULE(Name) DTR_MODULE_IMPL(Name, Name##Impl)

#ifndef TORCH_MODULE_IMPL
#define TORCH_MODULE_IMPL(Name, Impl) DTR_MODULE_IMPL(Name, Impl)
#endif
#ifndef TORCH_MODULE
#define TORCH_MODULE(Name) DTR_MODULE(Name)
#endif
