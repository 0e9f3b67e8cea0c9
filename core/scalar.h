// One Scalar type for every scalar argument (STYLE.md: never one overload per C type).
#pragma once

#include <cstdint>
#include <type_traits>

namespace dtr {

class Scalar {
 public:
  Scalar() = default;
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Scalar(T v) {  // NOLINT: implicit like c10::Scalar
    if constexpr (std::is_floating_point_v<T>) {
      is_floating_ = true;
      d_ = double(v);
      i_ = int64_t(v);
    } else {
      is_floating_ = false;
      is_bool_ = std::is_same_v<T, bool>;
      i_ = int64_t(v);
      d_ = double(v);
    }
  }
  bool is_floating() const { return is_floating_; }
  /// Made from a bool (c10::Scalar::isBoolean); is_floating() is false then.
  bool is_bool() const { return is_bool_; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }

 private:
  bool is_floating_ = false;
  bool is_bool_ = false;
  double d_ = 0;
  int64_t i_ = 0;
};

}  // namespace dtr
