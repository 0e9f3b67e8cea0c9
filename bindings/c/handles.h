// The machinery behind the C ABI (dtr_c.h): the process-wide handle table,
// the use flags that turn concurrent use of one object into DTR_ERR_BUSY,
// and the translation of C++ exceptions into status codes. Internal: not
// installed.
//
// A handle is 64 bits: kind (8) | generation (24) | slot index (32). The
// table keeps, per slot, the generation of the handle it holds now and a
// shared reference to the object; a lookup compares kind and generation, so
// a freed, never-issued or other-kind handle finds nothing. Freeing bumps
// the generation (a slot whose generation is exhausted is retired, never
// reused), so an old id can never reach a newer object. Lookups copy the
// shared reference out under the table's mutex: an object freed by one
// thread while another is inside a call on it lives until that call ends.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dtr/dtr_c.h"

namespace dtr::capi {

enum class Kind : uint8_t { kTensor = 1, kAttrs = 2, kModule = 3, kOptimizer = 4, kScope = 5 };
const char* kind_name(Kind k);

/// Base of every object behind a handle. `use` is the in-use flag: n > 0
/// calls reading, -1 one call changing it, 0 idle.
struct Object {
  virtual ~Object() = default;
  std::atomic<int32_t> use{0};
};

/// A failure of the C layer itself (bad handle or argument, busy, wrong
/// thread): thrown inside the API functions, turned into its status by
/// `guarded`.
class ApiError : public std::runtime_error {
 public:
  ApiError(dtr_status s, const std::string& message) : std::runtime_error(message), status(s) {}
  dtr_status status;
};

class HandleTable {
 public:
  static HandleTable& instance();
  uint64_t insert(Kind kind, std::shared_ptr<Object> obj);
  /// The object of `h` (null when `h` is not a live handle of `kind`).
  std::shared_ptr<Object> find(uint64_t h, Kind kind) const;
  /// Removes `h` and returns its object (null when not live), to be
  /// destroyed by the caller outside the table's lock.
  std::shared_ptr<Object> remove(uint64_t h, Kind kind);
  size_t live() const;

 private:
  struct Slot {
    uint32_t generation = 1;
    Kind kind = Kind::kTensor;
    std::shared_ptr<Object> obj;
  };
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

enum class Access { kRead, kWrite };

/// Holds one object's use flag for the duration of a call.
class Use {
 public:
  Use() = default;
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  ~Use() { release(); }
  /// Takes `obj`'s flag for `access` (ApiError BUSY when it conflicts).
  void hold(std::shared_ptr<Object> obj, Access access);
  void release() noexcept;
  Object* get() const { return obj_.get(); }

 private:
  std::shared_ptr<Object> obj_;
  Access access_ = Access::kRead;
};

[[noreturn]] void throw_invalid_handle(uint64_t h, Kind kind);

/// The object of handle `h` of kind `kind`, held for `access`: ApiError
/// INVALID_HANDLE when `h` is not live, BUSY when another call holds it in
/// a conflicting way.
template <typename T>
T& use(uint64_t h, Kind kind, Access access, Use& holder) {
  std::shared_ptr<Object> obj = HandleTable::instance().find(h, kind);
  if (!obj) {
    throw_invalid_handle(h, kind);
  }
  holder.hold(std::move(obj), access);
  return static_cast<T&>(*holder.get());
}

/// ApiError(DTR_ERR_INVALID_ARGUMENT) naming `what` unless `ok`.
inline void require(bool ok, const char* what) {
  if (!ok) throw ApiError(DTR_ERR_INVALID_ARGUMENT, what);
}

/// Records `message` as this thread's last error and returns `s`.
dtr_status fail(dtr_status s, const char* message) noexcept;

/// Maps the exception being handled to its status and records its message.
dtr_status fail_current_exception() noexcept;

/// Runs `f` (returning void), mapping every exception to its status.
template <typename F>
dtr_status guarded(F&& f) noexcept {
  try {
    f();
    return DTR_OK;
  } catch (...) {
    return fail_current_exception();
  }
}

}  // namespace dtr::capi
