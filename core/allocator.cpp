#include "core/allocator.h"

#include <array>
#include <cstdlib>
#include <new>

namespace dtr {
namespace {

class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t rounded = ((nbytes == 0 ? 1 : nbytes) + 63) & ~size_t{63};
    return std::aligned_alloc(64, rounded);
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
};

std::array<Allocator*, kNumDeviceTypes>& table() {
  static HostAllocator host;
  static std::array<Allocator*, kNumDeviceTypes> t{&host, nullptr};
  return t;
}

}  // namespace

Allocator* get_allocator(DeviceType type) { return table()[size_t(type)]; }

Allocator* set_allocator(DeviceType type, Allocator* alloc) {
  Allocator* prev = table()[size_t(type)];
  table()[size_t(type)] = alloc;
  return prev;
}

}  // namespace dtr
