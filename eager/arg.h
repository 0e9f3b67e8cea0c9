// DTR_ARG: the options structs' accessors (libtorch's TORCH_ARG), shared by
// the optimizers' and the nn modules' options.
#pragma once

/// Declares an option `name` of type T with libtorch's TORCH_ARG accessors:
/// `name(v)` sets it and returns the options (so setters chain), `name()`
/// reads it (a mutable reference on non-const options).
#define DTR_ARG(T, name)                                          \
 public:                                                          \
  auto name(const T& new_##name)->decltype(*this) {               \
    this->name##_ = new_##name;                                   \
    return *this;                                                 \
  }                                                               \
  const T& name() const noexcept { return this->name##_; }        \
  T& name() noexcept { return this->name##_; }                    \
                                                                  \
 private:                                                         \
  T name##_
