// The Allocator interface: one per device (a backend's, core/backend.h), and
// the provider a runtime gets them from (tests give a runtime their own).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace dtr {

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns `nbytes` bytes aligned to 64, or nullptr when the device is out
  /// of memory (the caller turns that into OutOfMemoryError).
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  /// Bytes of freed blocks an allocator keeps for reuse (0 without a cache).
  virtual int64_t cached_bytes() const { return 0; }
  /// Returns cached blocks to the system until at least `nbytes` are gone
  /// (or the cache is empty). The runtime calls it so that resident plus
  /// cached bytes stay within the memory budget (Note [hard budget]).
  virtual void release_cached(int64_t /*nbytes*/) {}
  /// allocate(nbytes), after which at most `max_cached_bytes` of freed blocks
  /// stay cached (the runtime passes what the budget leaves beside resident
  /// storage; Note [hard budget]). A caching allocator may recycle blocks it
  /// has to give up into the new one.
  virtual void* allocate_within(size_t nbytes, int64_t max_cached_bytes) {
    void* p = allocate(nbytes);
    const int64_t over = cached_bytes() - max_cached_bytes;
    if (over > 0) release_cached(over);
    return p;
  }
};

/// Where a runtime gets the allocator of each device's new storages
/// (remat::Runtime's constructor; backend_allocators() in core/backend.h
/// is the backends' own).
class AllocatorProvider {
 public:
  virtual ~AllocatorProvider() = default;
  /// Never null for a device that exists; throws DeviceError otherwise.
  virtual Allocator* allocator(Device device) = 0;
};

}  // namespace dtr
