// Integer arithmetic of the elementwise kernels, shared by the CPU's and
// CUDA's: two's complement wrap-around instead of undefined signed
// overflow (PyTorch's integer add, sub, mul and neg wrap), and integer
// power by squaring.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/host_device.h"

namespace dtr {

template <typename C>
DTR_HOST_DEVICE inline C wrap_add(C a, C b) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t(a) + uint64_t(b));
  else return a + b;
}
template <typename C>
DTR_HOST_DEVICE inline C wrap_sub(C a, C b) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t(a) - uint64_t(b));
  else return a - b;
}
template <typename C>
DTR_HOST_DEVICE inline C wrap_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t(a) * uint64_t(b));
  else return a * b;
}
template <typename C>
DTR_HOST_DEVICE inline C negate(C x) {
  if constexpr (std::is_integral_v<C>) return C(uint64_t{0} - uint64_t(x));
  else return -x;
}

/// base^exp for int64; negative exponents give 0 except for bases 1 and -1
/// (PyTorch's powi).
DTR_HOST_DEVICE inline int64_t ipow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 != 0) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = uint64_t(base);
  while (exp != 0) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return int64_t(result);
}

}  // namespace dtr
