// One Scalar type for every scalar argument (STYLE.md: never one overload per C type).
#pragma once

#include <cstdint>
#include <iosfwd>
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

  // c10::Scalar's spellings (what item() and libtorch code use).
  /// The value converted to T (float, double, an integer type or bool), as
  /// to_double() / to_int() give it; bool is "nonzero".
  template <typename T>
  T to() const {
    static_assert(std::is_arithmetic_v<T>, "Scalar::to<T>: T must be an arithmetic type");
    if constexpr (std::is_same_v<T, bool>) return toBool();
    else if constexpr (std::is_floating_point_v<T>) return T(d_);
    else return T(i_);
  }
  double toDouble() const { return d_; }
  float toFloat() const { return float(d_); }
  int64_t toLong() const { return i_; }
  int toInt() const { return int(i_); }
  bool toBool() const { return is_floating_ ? d_ != 0 : i_ != 0; }
  bool isFloatingPoint() const { return is_floating_; }
  /// An integer value; with includeBool, a bool one counts too.
  bool isIntegral(bool includeBool) const { return !is_floating_ && (includeBool || !is_bool_); }
  bool isBoolean() const { return is_bool_; }
  /// -value, keeping the kind (a bool Scalar negates as the integer 0 or 1).
  Scalar operator-() const {
    if (is_floating_) return Scalar(-d_);
    return Scalar(-i_);
  }
  /// Whether the value equals `v` (c10::Scalar::equal): compared as doubles
  /// when either side is floating, else as integers.
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  bool equal(T v) const {
    if (is_floating_ || std::is_floating_point_v<T>) return d_ == double(v);
    return i_ == int64_t(v);
  }

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

/// Prints the value as libtorch does: a floating value as a double, a bool
/// as "true"/"false", an integer as an int64.
std::ostream& operator<<(std::ostream& out, const Scalar& s);

}  // namespace dtr
