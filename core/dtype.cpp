#include "core/dtype.h"

#include <string>

#include "core/error.h"

namespace dtr {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kBool: return "bool";
    case DType::kUInt8: return "uint8";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name == "float32" || name == "float" || name == "f32") return kFloat32;
  if (name == "float64" || name == "double" || name == "f64") return kFloat64;
  if (name == "float16" || name == "half" || name == "f16") return kFloat16;
  if (name == "bfloat16" || name == "bf16") return kBFloat16;
  if (name == "int64" || name == "long") return kInt64;
  if (name == "int32" || name == "int") return kInt32;
  if (name == "bool") return kBool;
  if (name == "uint8") return kUInt8;
  throw ValueError(fmt::format(
      "unknown dtype '{}'; expected one of float32, float64, float16, bfloat16, int64, int32, "
      "bool, uint8",
      name));
}

namespace {
// Rank in PyTorch's promotion lattice for the simple cases we support.
int category(DType t) {
  if (t == kBool) return 0;
  if (is_integral(t)) return 1;
  return 2;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (a == kFloat64 || b == kFloat64) return kFloat64;
    if (a == kFloat32 || b == kFloat32) return kFloat32;
    return kFloat32;  // float16 with bfloat16 -> float32, like PyTorch
  }
  // integral: widest wins; uint8 with int32/int64 -> the signed one
  if (a == kInt64 || b == kInt64) return kInt64;
  if (a == kInt32 || b == kInt32) return kInt32;
  return kInt32;
}

}  // namespace dtr
