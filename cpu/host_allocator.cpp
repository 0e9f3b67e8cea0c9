#include "cpu/host_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include <sys/mman.h>

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
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

// A cacheable block from the system: page-rounded ones are mapped on their
// own, so freeing one gives its pages back to the kernel at once (a block
// freed into glibc's heap stays resident there), smaller ones come from malloc.
void* system_allocate(size_t bytes) {
  if (bytes < kHostCachePageBytes) return std::aligned_alloc(kAlignment, bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void system_free(void* p, size_t bytes) {
  if (bytes < kHostCachePageBytes) {
    std::free(p);
  } else {
    munmap(p, bytes);
  }
}

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
  return allocate_within(nbytes, kUnlimited);
}

void* CachingHostAllocator::allocate_within(size_t nbytes, int64_t max_cached_bytes) {
  const size_t bytes = block_bytes(nbytes);
  const bool cacheable = bytes >= kHostCacheMinBytes && cap_bytes_ > 0;
  if (!cacheable) {
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (max_cached_bytes != kUnlimited) release_cached(cached_bytes() - max_cached_bytes);
    return p;
  }
  std::vector<std::pair<void*, size_t>> gone;
  std::pair<void*, size_t> recycled{nullptr, 0};
  void* hit = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      hit = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= int64_t(bytes);
      stats_.in_use_bytes += int64_t(bytes);
      ++stats_.hits;
      if (stats_.cached_bytes > max_cached_bytes)
        gone = take_cached_locked(stats_.cached_bytes - max_cached_bytes);
    } else {
      ++stats_.misses;
      // Held bytes stay within max(cap, peak in use), and cached ones within
      // what the caller allows: the cache gives up blocks.
      const int64_t limit = std::max<int64_t>(int64_t(cap_bytes_), stats_.peak_in_use_bytes);
      const int64_t over = std::min(
          stats_.cached_bytes, std::max(stats_.in_use_bytes + stats_.cached_bytes + int64_t(bytes) - limit,
                                        stats_.cached_bytes - max_cached_bytes));
      if (over > 0) {
        // A block that has to go anyway lends its resident pages to this one.
        recycled = take_recyclable_locked(bytes);
        gone = take_cached_locked(over - int64_t(recycled.second));
      }
    }
  }
  if (hit != nullptr) {
    free_blocks(gone);
    return hit;
  }
  free_blocks(gone);
  void* p = recycled.first != nullptr ? resize_mapping(recycled.first, recycled.second, bytes)
                                      : system_allocate(bytes);
  if (p == nullptr) {
    empty_cache();
    p = system_allocate(bytes);
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

std::pair<void*, size_t> CachingHostAllocator::take_recyclable_locked(size_t bytes) {
  if (bytes < kHostCachePageBytes) return {nullptr, 0};
  // The smallest mapped block that covers the request (its tail is
  // unmapped), else the largest one (it grows; only the growth is new).
  size_t best = 0;
  for (const auto& [size, list] : free_) {
    if (list.empty() || size < kHostCachePageBytes) continue;
    const bool covers = size >= bytes, best_covers = best >= bytes;
    if (best == 0 || (covers && (!best_covers || size < best)) || (!covers && !best_covers && size > best))
      best = size;
  }
  if (best == 0) return {nullptr, 0};
  auto& list = free_[best];
  void* p = list.back();
  list.pop_back();
  stats_.cached_bytes -= int64_t(best);
  ++stats_.recycled;
  return {p, best};
}

void* CachingHostAllocator::resize_mapping(void* p, size_t old_bytes, size_t new_bytes) {
  void* q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
  if (q != MAP_FAILED) return q;
  munmap(p, old_bytes);
  return system_allocate(new_bytes);
}

void CachingHostAllocator::free_blocks(const std::vector<std::pair<void*, size_t>>& blocks) {
  for (const auto& [p, bytes] : blocks) system_free(p, bytes);
}

void CachingHostAllocator::empty_cache() {
  std::vector<std::pair<void*, size_t>> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone = take_cached_locked(stats_.cached_bytes);
  }
  free_blocks(gone);
}

int64_t CachingHostAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.cached_bytes;
}

std::vector<std::pair<void*, size_t>> CachingHostAllocator::take_cached_locked(int64_t nbytes) {
  std::vector<std::pair<void*, size_t>> gone;
  std::vector<size_t> sizes;
  for (const auto& [bytes, list] : free_)
    if (!list.empty()) sizes.push_back(bytes);
  std::sort(sizes.rbegin(), sizes.rend());
  int64_t released = 0;
  for (size_t bytes : sizes) {
    auto& list = free_[bytes];
    while (!list.empty() && released < nbytes) {
      gone.emplace_back(list.back(), bytes);
      list.pop_back();
      released += int64_t(bytes);
      stats_.cached_bytes -= int64_t(bytes);
    }
    if (released >= nbytes) break;
  }
  return gone;
}

void CachingHostAllocator::release_cached(int64_t nbytes) {
  std::vector<std::pair<void*, size_t>> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone = take_cached_locked(nbytes);
  }
  free_blocks(gone);
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


}  // namespace dtr::cpu
