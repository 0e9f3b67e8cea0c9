// A device memory source for tests of the caching allocator
// (core/caching_allocator.h): host memory, a fixed capacity it refuses to
// go past, and counts of what was asked of it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/caching_allocator.h"

namespace dtr::testing {

class FakeArena final : public DeviceMemorySource {
 public:
  explicit FakeArena(int64_t capacity_bytes) : capacity_(capacity_bytes) {}
  ~FakeArena() override {
    for (const auto& [p, n] : live_) std::free(p);
  }
  void* reserve(size_t nbytes) override {
    std::lock_guard lock(mutex_);
    ++reserve_calls;
    if (reserved + int64_t(nbytes) > capacity_) {
      ++refused;
      return nullptr;
    }
    void* p = std::aligned_alloc(512, (nbytes + 511) & ~size_t{511});
    if (p == nullptr) return nullptr;
    live_.emplace(p, nbytes);
    reserved += int64_t(nbytes);
    if (reserved > peak_reserved) peak_reserved = reserved;
    return p;
  }
  void release(void* p, size_t nbytes) override {
    std::lock_guard lock(mutex_);
    ++release_calls;
    auto it = live_.find(p);
    if (it == live_.end() || it->second != nbytes) {
      ++bad_releases;  // a pointer or size it never handed out
      return;
    }
    live_.erase(it);
    reserved -= int64_t(nbytes);
    std::free(p);
  }
  int64_t capacity() const { return capacity_; }
  void set_capacity(int64_t bytes) { capacity_ = bytes; }

  int64_t reserved = 0;       // bytes reserved now
  int64_t peak_reserved = 0;  // high-water mark of reserved
  int64_t reserve_calls = 0, release_calls = 0, refused = 0, bad_releases = 0;

 private:
  std::mutex mutex_;
  int64_t capacity_;
  std::map<void*, size_t> live_;
};

}  // namespace dtr::testing
