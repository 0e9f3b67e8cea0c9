// Element types. Names and promotion follow PyTorch (torch.result_type).
#pragma once

#include <cstdint>
#include <string_view>

namespace dtr {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt64,
  kInt32,
  kBool,
  kUInt8,
};
inline constexpr int kNumDTypes = 8;

inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr DType kFloat16 = DType::kFloat16;
inline constexpr DType kBFloat16 = DType::kBFloat16;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kInt32 = DType::kInt32;
inline constexpr DType kBool = DType::kBool;
inline constexpr DType kUInt8 = DType::kUInt8;
// libtorch's other spellings of the same dtypes (c10::kFloat, ...), and its
// name for the type (c10::ScalarType, what Tensor::scalar_type() returns).
inline constexpr DType kFloat = kFloat32;
inline constexpr DType kDouble = kFloat64;
inline constexpr DType kHalf = kFloat16;
inline constexpr DType kLong = kInt64;
inline constexpr DType kInt = kInt32;
inline constexpr DType kByte = kUInt8;
using ScalarType = DType;

/// Bytes per element.
constexpr int64_t itemsize(DType t) {
  switch (t) {
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kBool:
    case DType::kUInt8: return 1;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}
constexpr bool is_integral(DType t) { return !is_floating(t) && t != DType::kBool; }

/// PyTorch spelling: "float32", "bfloat16", ...
std::string_view dtype_name(DType t);

/// Parses a dtype name ("float32", "float", "bf16", ...). Throws ValueError.
DType parse_dtype(std::string_view name);

/// torch.promote_types for two tensor dtypes.
DType promote_types(DType a, DType b);

}  // namespace dtr
