#include "remat/window.h"

#include "core/error.h"

namespace dtr::remat {

std::optional<EvictionWindow> cheapest_window(std::span<const WindowSegment> segments, int64_t request) {
  DTR_CHECK(request > 0, ValueError, "cheapest_window: the request must be positive, got {} bytes", request);
  std::optional<EvictionWindow> best;
  for (size_t si = 0; si < segments.size(); ++si) {
    const WindowSegment& seg = segments[si];
    // The window is [l, r): for each start l, the shortest run from l that
    // holds the request. With scores >= 0 it is the cheapest run from l,
    // and the shortest run from l + 1 ends no earlier, so r only advances.
    size_t r = 0;
    int64_t bytes = 0, evicted = 0;
    double cost = 0;
    for (size_t l = 0; l < seg.size(); ++l) {
      if (seg[l].kind == WindowBlock::kPinned) {  // no window crosses it
        r = l + 1;
        bytes = evicted = 0;
        cost = 0;
        continue;
      }
      while (bytes < request && r < seg.size() && seg[r].kind != WindowBlock::kPinned) {
        bytes += seg[r].size;
        if (seg[r].kind == WindowBlock::kEvictable) {
          cost += seg[r].score;
          evicted += seg[r].size;
        }
        ++r;
      }
      if (bytes >= request &&
          (!best || cost < best->cost || (cost == best->cost && evicted < best->evicted_bytes)))
        best = EvictionWindow{si, l, r, cost, bytes, evicted};
      if (l + 1 == r) {  // the window empties: restart the sums at exact zeros
        bytes = evicted = 0;
        cost = 0;
      } else {
        bytes -= seg[l].size;
        if (seg[l].kind == WindowBlock::kEvictable) {
          cost -= seg[l].score;
          evicted -= seg[l].size;
        }
      }
    }
  }
  return best;
}

}  // namespace dtr::remat
