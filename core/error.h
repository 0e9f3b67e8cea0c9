// Error types of dtr (DESIGN.md "Errors"). A user-facing check throws a typed
// subclass of dtr::Error; a broken internal invariant throws InternalError.
// Nothing in the library aborts the process on bad input.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace dtr {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ValueError : public Error {
 public:
  using Error::Error;
};
class TypeError : public Error {
 public:
  using Error::Error;
};
class IndexError : public Error {
 public:
  using Error::Error;
};
class NotImplementedError : public Error {
 public:
  using Error::Error;
};
/// Thrown when an allocation cannot fit under the memory budget even after
/// evicting everything evictable; the message carries the report of
/// Note [hard budget]. The runtime's state stays consistent.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};
/// The runtime gave up on a budget under which it kept rebuilding what it
/// had just evicted: more than DTR_THRASH_LIMIT replays and replayed cost
/// per fresh op over a window of recent ops (Note [thrash guard]). The
/// message names the budget, the resident and locked bytes, the ratio, the
/// most replayed ops and the remedy. A kind of OutOfMemoryError (the budget
/// is too small for the program to make progress), so code that treats an
/// OutOfMemoryError as "infeasible" treats this alike. The runtime's state
/// stays consistent: raising the budget and going on works.
class ThrashError : public OutOfMemoryError {
 public:
  using OutOfMemoryError::OutOfMemoryError;
};
/// A device is absent or unusable: no backend for its type, no driver, or
/// an index past the devices present (PyTorch raises RuntimeError here).
class DeviceError : public Error {
 public:
  using Error::Error;
};
/// A collective or process group failed: the group is not initialized or was
/// destroyed, the ranks called different collectives or passed tensors of
/// different shapes or dtypes, a rank is not a member of the group, or the
/// communication library reported an error (PyTorch: DistBackendError).
/// Thrown on every rank that sees the failure, never a hang.
class DistributedError : public Error {
 public:
  using Error::Error;
};
/// A collective did not complete within DTR_COLLECTIVE_TIMEOUT: the message
/// names the op, its sequence number in the group and the ranks that never
/// joined it. The group is unusable afterwards (every later collective on it
/// throws DistributedError), as after a NCCL watchdog timeout in PyTorch.
class CollectiveTimeoutError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};
/// Autograd was misused: a tensor that backward needs was modified by an
/// in-place operation after it was saved, or backward ran a second time
/// through a graph whose saved tensors were freed. PyTorch raises
/// RuntimeError for both; the Python binding raises RuntimeError and the C
/// ABI returns DTR_ERR_RUNTIME.
class AutogradError : public Error {
 public:
  using Error::Error;
};
/// A broken internal invariant: a bug in dtr, never the user's fault.
class InternalError : public Error {
 public:
  using Error::Error;
};

/// Rethrows the exception being handled (call it inside a catch block) as
/// the same dtr error type with `context` appended to its message, so a
/// caller can add where an error happened without changing what a `catch`
/// for its type sees. Exceptions that are not dtr::Error are rethrown as they
/// are.
[[noreturn]] void rethrow_with_context(std::string_view context);

}  // namespace dtr

/// User-facing check: throws `ErrType` with a fmt-formatted message.
/// Example: DTR_CHECK(a.dim() == 2, ValueError, "matmul: expected 2-D, got {}", a.dim());
#define DTR_CHECK(cond, ErrType, ...)                       \
  do {                                                      \
    if (!(cond)) [[unlikely]] {                             \
      throw ::dtr::ErrType(::fmt::format(__VA_ARGS__));     \
    }                                                       \
  } while (0)

/// Internal invariant: throws InternalError naming the file and line.
#define DTR_INTERNAL_ASSERT(cond, ...)                                          \
  do {                                                                          \
    if (!(cond)) [[unlikely]] {                                                 \
      throw ::dtr::InternalError(::fmt::format(                                 \
          "internal error at {}:{}: {} ({}); please report", __FILE__, __LINE__, \
          ::fmt::format(__VA_ARGS__), #cond));                                  \
    }                                                                           \
  } while (0)
