#include "core/error.h"

#include "core/error_kind.h"

#include <exception>

namespace dtr {

ErrorKind error_kind(const Error& e) {
  // Most derived first.
  if (dynamic_cast<const OutOfMemoryError*>(&e)) return ErrorKind::kOutOfMemory;
  if (dynamic_cast<const CollectiveTimeoutError*>(&e)) return ErrorKind::kCollectiveTimeout;
  if (dynamic_cast<const DistributedError*>(&e)) return ErrorKind::kDistributed;
  if (dynamic_cast<const DeviceError*>(&e)) return ErrorKind::kDevice;
  if (dynamic_cast<const InternalError*>(&e)) return ErrorKind::kInternal;
  if (dynamic_cast<const AutogradError*>(&e)) return ErrorKind::kAutograd;
  if (dynamic_cast<const NotImplementedError*>(&e)) return ErrorKind::kNotImplemented;
  if (dynamic_cast<const IndexError*>(&e)) return ErrorKind::kIndex;
  if (dynamic_cast<const TypeError*>(&e)) return ErrorKind::kType;
  if (dynamic_cast<const ValueError*>(&e)) return ErrorKind::kValue;
  return ErrorKind::kError;
}

void throw_error(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::kValue: throw ValueError(message);
    case ErrorKind::kType: throw TypeError(message);
    case ErrorKind::kIndex: throw IndexError(message);
    case ErrorKind::kNotImplemented: throw NotImplementedError(message);
    case ErrorKind::kOutOfMemory: throw OutOfMemoryError(message);
    case ErrorKind::kDevice: throw DeviceError(message);
    case ErrorKind::kDistributed: throw DistributedError(message);
    case ErrorKind::kCollectiveTimeout: throw CollectiveTimeoutError(message);
    case ErrorKind::kInternal: throw InternalError(message);
    case ErrorKind::kAutograd: throw AutogradError(message);
    case ErrorKind::kError: break;
  }
  throw Error(message);
}

void rethrow_with_context(std::string_view context) {
  // Keeps the dynamic type of the error; anything else goes on unchanged.
  try {
    throw;
  } catch (const Error& e) {
    throw_error(error_kind(e), fmt::format("{}{}", e.what(), context));
  }
}

}  // namespace dtr
