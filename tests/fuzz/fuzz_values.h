// Argument values the fuzz targets draw from their input: small numbers
// that make valid shapes, dims and scalars most of the time, and now and
// then an extreme one (overflows, NaN), never a plain large size (that
// would be a real allocation of gigabytes, not a bug).
#pragma once

#include <cstdint>
#include <limits>

#include <fuzzer/FuzzedDataProvider.h>

namespace dtr::fuzz {

/// Mostly -3..8; 1 in 16: INT64_MAX, INT64_MIN, -2^31, 2^62 or 64.
inline int64_t small_int(FuzzedDataProvider& in) {
  const uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 240) return int64_t(pick % 12) - 3;
  constexpr int64_t kExtremes[] = {std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min(), -(int64_t{1} << 31),
                                   int64_t{1} << 62, 64};
  return kExtremes[pick % 5];
}

/// Mostly -2..2 in steps of 0.5; else NaN, +-inf, 1e300, -1e-300, 1e-12, 0.999999, 1.
inline double small_double(FuzzedDataProvider& in) {
  const uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 200) return double(int(pick % 9) - 4) * 0.5;
  constexpr double kExtremes[] = {std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(), 1e300, -1e-300,
                                  1e-12, 0.999999, 1.0};
  return kExtremes[pick % 8];
}

}  // namespace dtr::fuzz
