// The dtr error types as values, for carrying an error's type across a
// process boundary (a collective's refusal, Note [collectives] in
// docs/DESIGN.md) and throwing it again there.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace dtr {

enum class ErrorKind : uint8_t {
  kError = 1,
  kValue,
  kType,
  kIndex,
  kNotImplemented,
  kOutOfMemory,
  kDevice,
  kDistributed,
  kCollectiveTimeout,
  kInternal,
  kAutograd,
};
/// The most derived dtr error type of `e`.
ErrorKind error_kind(const Error& e);
/// Throws the dtr error type `kind` with `message` (dtr::Error for kError).
[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

}  // namespace dtr
