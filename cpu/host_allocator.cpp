#include "cpu/host_allocator.h"

#include <algorithm>
#include <cstdlib>

namespace dtr::cpu {

namespace {

// Nothing is cached under AddressSanitizer (GCC defines this macro for
// -fsanitize=address), so a use after free stays visible.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDefaultCap = 0;
#else
constexpr size_t kDefaultCap = kHostCacheCapBytes;
#endif

constexpr size_t kAlignment = 64;
constexpr size_t kPage = 4096;

}  // namespace

CachingHostAllocator::CachingHostAllocator(size_t cap_bytes) : cap_bytes_(cap_bytes) {}

CachingHostAllocator::~CachingHostAllocator() { empty_cache(); }

size_t CachingHostAllocator::block_bytes(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  // Page-rounded above the threshold, so sizes that differ by a few bytes
  // share blocks; 64-byte-rounded (aligned_alloc's rule) below it.
  const size_t unit = nbytes >= kHostCachePageBytes ? kPage : kAlignment;
  return (nbytes + unit - 1) / unit * unit;
}

void* CachingHostAllocator::allocate(size_t nbytes) {
  const size_t bytes = block_bytes(nbytes);
  const bool cacheable = bytes >= kHostCacheMinBytes && cap_bytes_ > 0;
  if (!cacheable) return std::aligned_alloc(kAlignment, bytes);
  std::vector<void*> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= int64_t(bytes);
      stats_.in_use_bytes += int64_t(bytes);
      ++stats_.hits;
      return p;
    }
    ++stats_.misses;
    // Held bytes stay within max(cap, peak in use): make room from the cache.
    const int64_t limit = std::max<int64_t>(int64_t(cap_bytes_), stats_.peak_in_use_bytes);
    const int64_t over = stats_.in_use_bytes + stats_.cached_bytes + int64_t(bytes) - limit;
    if (over > 0) gone = take_cached_locked(std::min(over, stats_.cached_bytes));
  }
  for (void* q : gone) std::free(q);
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) {
    empty_cache();
    p = std::aligned_alloc(kAlignment, bytes);
    if (p == nullptr) return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use_bytes += int64_t(bytes);
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return p;
}

void CachingHostAllocator::deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t bytes = block_bytes(nbytes);
  if (bytes >= kHostCacheMinBytes && cap_bytes_ > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use_bytes -= int64_t(bytes);
    // Moving a block from in use to cached keeps the held total where it
    // was, so it stays within max(cap, peak in use); release_cached may
    // have lowered it since.
    free_[bytes].push_back(ptr);
    stats_.cached_bytes += int64_t(bytes);
    return;
  }
  std::free(ptr);
}

void CachingHostAllocator::empty_cache() {
  std::unordered_map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_);
    stats_.cached_bytes = 0;
  }
  for (auto& [bytes, list] : blocks)
    for (void* p : list) std::free(p);
}

int64_t CachingHostAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.cached_bytes;
}

std::vector<void*> CachingHostAllocator::take_cached_locked(int64_t nbytes) {
  std::vector<void*> gone;
  std::vector<size_t> sizes;
  for (const auto& [bytes, list] : free_)
    if (!list.empty()) sizes.push_back(bytes);
  std::sort(sizes.rbegin(), sizes.rend());
  int64_t released = 0;
  for (size_t bytes : sizes) {
    auto& list = free_[bytes];
    while (!list.empty() && released < nbytes) {
      gone.push_back(list.back());
      list.pop_back();
      released += int64_t(bytes);
      stats_.cached_bytes -= int64_t(bytes);
    }
    if (released >= nbytes) break;
  }
  return gone;
}

void CachingHostAllocator::release_cached(int64_t nbytes) {
  std::vector<void*> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone = take_cached_locked(nbytes);
  }
  for (void* p : gone) std::free(p);
}

HostCacheStats CachingHostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

CachingHostAllocator& host_allocator() {
  // Never destroyed: storages held by other static objects may be freed
  // after this file's statics are gone.
  static CachingHostAllocator* a = new CachingHostAllocator(kDefaultCap);
  return *a;
}

namespace {
// Installed when libdtr is loaded, before any storage can exist.
[[maybe_unused]] const bool g_installed = [] {
  set_allocator(kCPU, &host_allocator());
  return true;
}();
}  // namespace

}  // namespace dtr::cpu
