// Fragmentation-aware eviction (Note [fragmentation-aware eviction]): the
// cheapest run of adjacent blocks of device memory whose eviction frees a
// contiguous range large enough for a request. Pure: it sees sizes, kinds
// and scores, never storages, so it is tested on hand-made layouts
// (tests/remat/window_test.cpp). The idea is Coop's (Zhang et al., NeurIPS
// 2023): evicting the storages of lowest score one by one, scattered over
// memory, can free enough bytes and still leave no free block a request
// fits in; evicting a window of neighbours cannot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace dtr::remat {

/// One block of a segment, as the eviction window sees it.
struct WindowBlock {
  enum Kind : uint8_t {
    kFree,       // not handed out: costs nothing
    kEvictable,  // an eviction candidate's bytes
    kPinned,     // handed out and not evictable now (locked, pinned, constant, unknown)
  };
  int64_t size = 0;   // bytes
  Kind kind = kFree;
  double score = 0;   // kEvictable: what evicting it costs (the policy's score, >= 0)
  int64_t id = -1;    // the caller's name for the block (the runtime: a pool slot)
};
/// The blocks of one segment in address order.
using WindowSegment = std::vector<WindowBlock>;

/// Blocks [begin, end) of segments[segment].
struct EvictionWindow {
  size_t segment = 0;
  size_t begin = 0, end = 0;
  double cost = 0;            // Σ scores of its evictable blocks
  int64_t bytes = 0;          // Σ sizes of its blocks
  int64_t evicted_bytes = 0;  // Σ sizes of its evictable blocks
};

/// The contiguous run of blocks within one segment whose sizes sum to at
/// least `request` bytes, holding no pinned block, of least cost; among
/// equal costs the one that evicts fewest bytes, then the first in segment
/// and address order. nullopt when no segment has such a run. Scores must
/// be >= 0 (two pointers over each segment: O(blocks)). Throws ValueError
/// for a request <= 0 bytes.
std::optional<EvictionWindow> cheapest_window(std::span<const WindowSegment> segments, int64_t request);

}  // namespace dtr::remat
