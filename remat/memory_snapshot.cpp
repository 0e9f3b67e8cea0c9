#include "remat/memory_snapshot.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "core/absl_compat.h"
#include "core/caching_allocator.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/memory_history.h"
#include "core/pickle.h"
#include "remat/runtime.h"

namespace dtr::memory {
namespace {

std::optional<RecordMode> parse_enabled(std::optional<std::string_view> v) {
  if (!v) return RecordMode::kOff;
  if (*v == "all") return RecordMode::kAll;
  if (*v == "state") return RecordMode::kState;
  return std::nullopt;
}

std::optional<ContextMode> parse_context(std::optional<std::string_view> v) {
  if (!v) return ContextMode::kNone;
  if (*v == "all") return ContextMode::kAll;
  if (*v == "alloc") return ContextMode::kAlloc;
  if (*v == "state") return ContextMode::kState;
  return std::nullopt;
}

// Devices in the order of the snapshot's indices: cuda:0..N at 0..N (as in
// PyTorch's snapshots), then privateuseone, then the cpu.
int type_rank(DeviceType t) {
  switch (t) {
    case DeviceType::kCUDA: return 0;
    case DeviceType::kPrivateUse1: return 1;
    case DeviceType::kCPU: return 2;
  }
  return 3;
}

// Writes strings through the pickle memo: each distinct string is stored once.
class Writer {
 public:
  PickleWriter w;
  void str(std::string_view s) {
    auto it = memo_.find(to_absl(s));
    if (it != memo_.end()) return w.get(it->second);
    w.string(s);
    memo_.emplace(std::string(s), w.put());
  }
  void key(std::string_view k) { str(k); }
  void integer(int64_t v) { w.integer(v); }
  void address(uint64_t v) { w.integer(v); }
  // One dict entry.
  void entry(std::string_view k, int64_t v) {
    key(k);
    w.integer(v);
  }
  void entry(std::string_view k, std::string_view v) {
    key(k);
    str(v);
  }

 private:
  absl::flat_hash_map<std::string, uint32_t> memo_;
};

struct Snapshotter {
  Writer out;
  Recorded rec;
  std::vector<uint32_t> frames_memo;  // per frame list: its memo id + 1 once written
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, uint32_t> live_frames;

  static uint32_t device_key(Device d) { return (uint32_t(d.type) << 24) | uint32_t(d.index); }

  void frames(uint32_t id) {
    if (id >= rec.frames.size()) id = 0;
    if (frames_memo[id] != 0) return out.w.get(frames_memo[id] - 1);
    out.w.begin_list();
    frames_memo[id] = out.w.put() + 1;
    for (const Recorded::Frame& f : rec.frames[id]) {
      out.w.begin_dict();
      out.entry("name", f.name);
      out.entry("filename", f.filename);
      out.entry("line", 0);
      out.w.end_dict();
    }
    out.w.end_list();
  }
  uint32_t block_frames(Device d, const void* p) const {
    auto it = live_frames.find(std::pair{device_key(d), uint64_t(reinterpret_cast<uintptr_t>(p))});
    return it == live_frames.end() ? 0 : it->second;
  }

  struct Block {
    const void* ptr;
    int64_t size;
    int64_t requested;  // 0: free
    bool allocated;
  };
  void segment(int index, Device d, const std::vector<Block>& blocks, bool small) {
    int64_t total = 0, allocated = 0, requested = 0;
    for (const Block& b : blocks) {
      total += b.size;
      if (b.allocated) {
        allocated += b.size;
        requested += b.requested;
      }
    }
    Writer& o = out;
    o.w.begin_dict();
    o.entry("device", index);
    o.entry("address", int64_t(reinterpret_cast<uintptr_t>(blocks.front().ptr)));
    o.entry("total_size", total);
    o.entry("allocated_size", allocated);
    o.entry("active_size", allocated);
    o.entry("requested_size", requested);
    o.entry("stream", 0);
    o.entry("segment_type", small ? "small" : "large");
    o.key("is_expandable");
    o.w.boolean(false);
    o.key("frames");
    frames(0);
    o.key("blocks");
    o.w.begin_list();
    for (const Block& b : blocks) {
      const uint32_t f = b.allocated ? block_frames(d, b.ptr) : 0;
      o.w.begin_dict();
      o.entry("address", int64_t(reinterpret_cast<uintptr_t>(b.ptr)));
      o.entry("size", b.size);
      o.entry("requested_size", b.allocated ? b.requested : 0);
      o.entry("state", b.allocated ? "active_allocated" : "inactive");
      o.key("frames");
      frames(f);
      if (b.allocated) {  // the form of PyTorch 1.13 and 2.0, which their _memory_viz reads
        o.key("history");
        o.w.begin_list();
        o.w.begin_dict();
        o.entry("addr", int64_t(reinterpret_cast<uintptr_t>(b.ptr)));
        o.entry("real_size", b.requested);
        o.key("frames");
        frames(f);
        o.w.end_dict();
        o.w.end_list();
      }
      o.w.end_dict();
    }
    o.w.end_list();
    o.w.end_dict();
  }

  void event(const Event& e) {
    Writer& o = out;
    o.w.begin_dict();
    o.entry("action", action_name(e.action));
    o.entry("addr", int64_t(e.addr));
    o.entry("size", e.size);
    o.entry("stream", 0);
    o.entry("time_us", e.time_us);
    o.key("frames");
    frames(e.frames);
    if (e.action == Action::kOom) {
      o.entry("device_free", e.device_free);
    }
    if (e.why != Why::kNone && e.frames != 0 && e.frames < rec.frames.size() && !rec.frames[e.frames].empty()) {
      o.entry("user_metadata", rec.frames[e.frames].front().name);
    }
    o.w.end_dict();
  }
};

}  // namespace

void record_history(std::optional<std::string_view> enabled, std::optional<std::string_view> context,
                    std::string_view stacks, size_t max_entries) {
  const std::optional<RecordMode> e = parse_enabled(enabled);
  DTR_CHECK(e.has_value(), ValueError,
            "record_history: enabled must be \"all\", \"state\" or None (off), got \"{}\"", *enabled);
  const std::optional<ContextMode> c = parse_context(context);
  DTR_CHECK(c.has_value(), ValueError,
            "record_history: context must be \"all\", \"alloc\", \"state\" or None, got \"{}\"", *context);
  DTR_CHECK(stacks == "python" || stacks == "all", ValueError,
            "record_history: stacks must be \"python\" or \"all\", got \"{}\"", stacks);
  set_history(HistorySettings{*e, *c, max_entries});
}

std::string snapshot() {
  const std::vector<remat::Runtime::MemoryHolding> holdings = remat::Runtime::global().memory_holdings();
  Snapshotter s;
  for (const auto& h : holdings) {
    int64_t live = 0;
    for (const auto& [p, n] : h.live) live += n;
    record_snapshot_event(h.device, live);
  }
  s.rec = recorded();
  s.frames_memo.assign(s.rec.frames.size(), 0);
  for (const Recorded::Live& l : s.rec.live) s.live_frames[{Snapshotter::device_key(l.device), l.addr}] = l.frames;

  // The devices, in index order.
  std::vector<Device> devices;
  const auto add = [&](Device d) {
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  };
  const auto device_of = [&](const Allocator* a) -> std::optional<Device> {
    for (const auto& h : holdings)
      if (h.allocator == a && a != nullptr) return h.device;
    return std::nullopt;
  };
  for (const auto& h : holdings) add(h.device);
  for (const Event& e : s.rec.events)
    if (e.allocator == nullptr) add(e.device);
  int max_cuda = -1;
  for (const Device& d : devices)
    if (d.is_cuda()) max_cuda = std::max(max_cuda, d.index);
  for (int i = 0; i <= max_cuda; ++i) add(Device(kCUDA, i));
  std::sort(devices.begin(), devices.end(), [](const Device& a, const Device& b) {
    return type_rank(a.type) != type_rank(b.type) ? type_rank(a.type) < type_rank(b.type) : a.index < b.index;
  });
  const auto index_of = [&](Device d) {
    return int(std::find(devices.begin(), devices.end(), d) - devices.begin());
  };

  Writer& o = s.out;
  o.w.begin_dict();
  o.key("segments");
  o.w.begin_list();
  for (const auto& h : holdings) {
    if (h.allocator == nullptr) continue;
    const int index = index_of(h.device);
    const std::vector<MemorySegmentLayout> layout = h.allocator->layout();
    if (!layout.empty()) {
      // A caching allocator's segments: its blocks, each handed-out one
      // matched to the storage whose bytes start there.
      absl::flat_hash_map<const void*, int64_t> requested;
      for (const auto& [p, n] : h.live) requested.emplace(p, n);
      for (const MemorySegmentLayout& seg : layout) {
        if (seg.empty()) continue;
        std::vector<Snapshotter::Block> blocks;
        int64_t total = 0;
        for (const MemoryBlock& b : seg) {
          auto it = requested.find(b.ptr);
          blocks.push_back({b.ptr, b.size, it != requested.end() ? it->second : b.size, b.allocated});
          total += b.size;
        }
        s.segment(index, h.device, blocks, total == int64_t(kSmallSegmentBytes));
      }
    } else {
      // No segments (the cpu's host allocator): each block in use and each
      // cached free block is a segment of its own.
      std::vector<Snapshotter::Block> blocks;
      for (const auto& [p, n] : h.live) blocks.push_back({p, std::max<int64_t>(h.allocator->block_bytes(size_t(n)), n), n, true});
      for (const MemoryBlock& b : h.allocator->cached_blocks()) blocks.push_back({b.ptr, b.size, 0, false});
      std::sort(blocks.begin(), blocks.end(), [](const auto& a, const auto& b) {
        return std::less<const void*>()(a.ptr, b.ptr);
      });
      for (const Snapshotter::Block& b : blocks) s.segment(index, h.device, {b}, b.size < (int64_t{1} << 20));
    }
  }
  o.w.end_list();
  o.key("device_traces");
  o.w.begin_list();
  std::vector<std::vector<const Event*>> per_device(devices.size());
  for (const Event& e : s.rec.events) {
    std::optional<Device> d = e.allocator ? device_of(e.allocator) : std::optional<Device>(e.device);
    if (!d) continue;  // an allocator no device of the runtime uses (a test's own)
    per_device[size_t(index_of(*d))].push_back(&e);
  }
  for (const auto& events : per_device) {
    o.w.begin_list();
    for (const Event* e : events) s.event(*e);
    o.w.end_list();
  }
  o.w.end_list();
  o.key("devices");
  o.w.begin_list();
  for (const Device& d : devices) o.str(d.str());
  o.w.end_list();
  o.w.end_dict();
  return o.w.finish();
}

void dump_snapshot(const std::string& path) {
  const std::string bytes = snapshot();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  DTR_CHECK(f != nullptr, ValueError, "dump_snapshot: cannot open '{}' for writing: {}", path, std::strerror(errno));
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int err = n == bytes.size() ? 0 : errno;
  const bool closed = std::fclose(f) == 0;
  DTR_CHECK(n == bytes.size() && closed, ValueError, "dump_snapshot: cannot write '{}': {}", path,
            std::strerror(err != 0 ? err : errno));
}

namespace {
std::mutex g_exit_mu;
std::string* g_exit_path = nullptr;  // never destroyed: read by the exit handler

void dump_at_exit() {
  std::string path;
  {
    std::lock_guard lock(g_exit_mu);
    if (g_exit_path == nullptr || g_exit_path->empty()) return;
    path = *g_exit_path;
  }
  try {
    dump_snapshot(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtr: DTR_MEMORY_SNAPSHOT: %s\n", e.what());
  }
}
}  // namespace

void set_snapshot_at_exit(const std::string& path) {
  std::lock_guard lock(g_exit_mu);
  const bool first = g_exit_path == nullptr;
  if (first) g_exit_path = new std::string;
  if (path.empty()) {
    if (!g_exit_path->empty()) set_history(HistorySettings{});
    g_exit_path->clear();
    return;
  }
  *g_exit_path = path;
  if (!recording()) set_history(HistorySettings{RecordMode::kAll, ContextMode::kAll});
  if (first) std::atexit(dump_at_exit);
}

}  // namespace dtr::memory
