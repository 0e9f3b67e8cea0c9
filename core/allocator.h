// The Allocator interface: one per device type, swappable (tests install fakes).
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
};

/// The allocator used for new storages on `type`. Never null for kCPU.
Allocator* get_allocator(DeviceType type);
/// Installs `alloc` for `type` (not owned); returns the previous one.
Allocator* set_allocator(DeviceType type, Allocator* alloc);

}  // namespace dtr
