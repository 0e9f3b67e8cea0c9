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
      i_ = saturating_int(d_);
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
  /// The value as int64: a floating Scalar truncates toward zero, saturating
  /// at int64's limits, and NaN gives 0 (a cast out of range would be
  /// undefined behaviour). Range checks read to_double().
  int64_t to_int() const { return i_; }

 private:
  static int64_t saturating_int(double d) {
    constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact in a double
    if (!(d == d)) return 0;
    if (d >= kTwo63) return INT64_MAX;
    if (d < -kTwo63) return INT64_MIN;
    return int64_t(d);
  }

  bool is_floating_ = false;
  bool is_bool_ = false;
  double d_ = 0;
  int64_t i_ = 0;
};

}  // namespace dtr
