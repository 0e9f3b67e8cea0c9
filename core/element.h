// Reading and writing one element of any dtype, and strided iteration.
// Generic (slow) paths; kernels specialise their hot loops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "core/shape.h"

namespace dtr {

inline double load_as_double(const std::byte* p, DType t) {
  switch (t) {
    case kFloat32: { float v; std::memcpy(&v, p, 4); return v; }
    case kFloat64: { double v; std::memcpy(&v, p, 8); return v; }
    case kFloat16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case kBFloat16: { uint16_t v; std::memcpy(&v, p, 2); return bfloat16_to_float(v); }
    case kInt64: { int64_t v; std::memcpy(&v, p, 8); return double(v); }
    case kInt32: { int32_t v; std::memcpy(&v, p, 4); return double(v); }
    case kBool: return *reinterpret_cast<const uint8_t*>(p) != 0 ? 1.0 : 0.0;
    case kUInt8: return double(*reinterpret_cast<const uint8_t*>(p));
  }
  return 0;
}

inline int64_t load_as_int(const std::byte* p, DType t) {
  switch (t) {
    case kInt64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case kInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case kBool: return *reinterpret_cast<const uint8_t*>(p) != 0 ? 1 : 0;
    case kUInt8: return *reinterpret_cast<const uint8_t*>(p);
    default: return int64_t(load_as_double(p, t));
  }
}

/// ValueError unless the integer dtype `t` holds `v` (c10's checked_convert:
/// torch.full((2,), 1e300, dtype=torch.int64) raises the same way); the
/// plain conversion would be undefined behaviour.
inline void check_fits_integer(double v, DType t, double lo, double hi) {
  DTR_CHECK(v >= lo && v < hi, ValueError, "value {} cannot be converted to type {} without overflow",
            v, dtype_name(t));
}

/// Writes `v` as one element of dtype `t`. Throws ValueError for a value an
/// integer dtype cannot hold (NaN included); uint8 wraps like PyTorch's.
inline void store_from_double(std::byte* p, DType t, double v) {
  switch (t) {
    case kFloat32: { float x = float(v); std::memcpy(p, &x, 4); return; }
    case kFloat64: std::memcpy(p, &v, 8); return;
    case kFloat16: { uint16_t x = float_to_half(float(v)); std::memcpy(p, &x, 2); return; }
    case kBFloat16: { uint16_t x = float_to_bfloat16(float(v)); std::memcpy(p, &x, 2); return; }
    case kInt64: {
      check_fits_integer(v, t, -9223372036854775808.0, 9223372036854775808.0);
      int64_t x = int64_t(v);
      std::memcpy(p, &x, 8);
      return;
    }
    case kInt32: {
      check_fits_integer(v, t, -2147483648.0, 2147483648.0);
      int32_t x = int32_t(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case kBool: *reinterpret_cast<uint8_t*>(p) = v != 0.0 ? 1 : 0; return;
    case kUInt8:
      check_fits_integer(v, t, -9223372036854775808.0, 9223372036854775808.0);
      *reinterpret_cast<uint8_t*>(p) = uint8_t(int64_t(v));
      return;
  }
}

inline void store_from_int(std::byte* p, DType t, int64_t v) {
  switch (t) {
    case kInt64: std::memcpy(p, &v, 8); return;
    case kInt32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); return; }
    case kBool: *reinterpret_cast<uint8_t*>(p) = v != 0 ? 1 : 0; return;
    case kUInt8: *reinterpret_cast<uint8_t*>(p) = uint8_t(v); return;
    default: store_from_double(p, t, double(v)); return;
  }
}

/// Converts one element from `src` (dtype `st`) to `dst` (dtype `dt`).
inline void convert_element(std::byte* dst, DType dt, const std::byte* src, DType st) {
  if (!is_floating(dt) && !is_floating(st)) {
    store_from_int(dst, dt, load_as_int(src, st));
  } else {
    store_from_double(dst, dt, load_as_double(src, st));
  }
}

/// Calls f(i, offset) for each element i (row-major order) of a tensor of
/// `shape` and `strides`, where offset is the element offset from element 0.
template <typename F>
void for_each_offset(IntList shape, IntList strides, int64_t begin, int64_t end, F&& f) {
  const int64_t nd = int64_t(shape.size());
  if (nd == 0) {
    if (begin < end) f(int64_t{0}, int64_t{0});
    return;
  }
  int64_t idx[16] = {0};
  int64_t rem = begin, off = 0;
  for (int64_t d = nd - 1; d >= 0; --d) {
    const int64_t s = shape[size_t(d)];
    idx[d] = s == 0 ? 0 : rem % s;
    rem = s == 0 ? 0 : rem / s;
    off += idx[d] * strides[size_t(d)];
  }
  for (int64_t i = begin; i < end; ++i) {
    f(i, off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      off += strides[size_t(d)];
      if (++idx[d] < shape[size_t(d)]) break;
      off -= idx[d] * strides[size_t(d)];
      idx[d] = 0;
    }
  }
}

}  // namespace dtr
