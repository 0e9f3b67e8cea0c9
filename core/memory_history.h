// The recorder behind dtr::memory::record_history (remat/memory_snapshot.h):
// while on, every allocation and free of a storage's bytes, every segment a
// caching allocator reserves or gives back, and every out-of-memory error is
// kept as an event in the form of PyTorch's CUDA allocator trace
// (torch.cuda.memory._record_memory_history), each with its frames: what
// dtr did (evict, remat, swap out, swap in), the op being run and the
// dtr::trace::Scope names around it. Off, a hook costs one relaxed atomic
// load (recording()). Thread-safe: one mutex, taken by nothing else while
// held. Note [memory snapshots] in docs/DESIGN.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"

namespace dtr::memory {

namespace detail {
extern std::atomic<bool> g_recording;
}

/// Whether history is being recorded (the hooks' one relaxed load).
inline bool recording() { return detail::g_recording.load(std::memory_order_relaxed); }

/// PyTorch's `enabled`: nothing, the state only (frames of the blocks in
/// use, no trace), or the state and the trace of events.
enum class RecordMode : uint8_t { kOff, kState, kAll };
/// PyTorch's `context`: which events keep frames.
enum class ContextMode : uint8_t { kNone, kState, kAlloc, kAll };

struct HistorySettings {
  RecordMode enabled = RecordMode::kOff;
  ContextMode context = ContextMode::kAll;
  /// The trace keeps the last this many events (a ring); older ones go.
  size_t max_entries = std::numeric_limits<size_t>::max();
};

/// Starts, changes or stops recording. Turning "all" on again keeps the
/// events recorded so far; "state" drops them, off drops everything.
void set_history(const HistorySettings& s);
HistorySettings history();

/// What dtr was doing when an allocation or free happened: the first frame
/// of its event, "<verb> <op>" (the op that produced the storage).
enum class Why : uint8_t { kNone, kEvict, kRemat, kReplayScratch, kSwapOut, kSwapIn };
std::string_view why_name(Why w);  // "evict", "remat", "remat scratch", "swap out", "swap in", ""

/// Sets the calling thread's `Why` (and its op) while in scope; nested
/// scopes restore the outer one. `op` must outlive the scope (registry names
/// do). Costs the one load when not recording.
class WhyScope {
 public:
  WhyScope(Why why, std::string_view op);
  ~WhyScope();
  WhyScope(const WhyScope&) = delete;
  WhyScope& operator=(const WhyScope&) = delete;

 private:
  bool active_ = false;
  Why prev_why_ = Why::kNone;
  std::string_view prev_op_;
};

/// dtr::trace::Scope's names on this thread, innermost last (while recording).
void push_scope(std::string_view name);
void pop_scope();

/// The hooks. `device` is the device whose memory it is; `op` the op being
/// run on this thread (may be empty). A free is recorded as PyTorch's pair
/// free_requested, free_completed.
void record_alloc(Device device, const void* ptr, int64_t nbytes, std::string_view op);
void record_free(Device device, const void* ptr, int64_t nbytes, std::string_view op);
void record_oom(Device device, int64_t request, int64_t device_free, std::string_view op);
/// A caching allocator reserved (alloc = true) or gave back a segment; its
/// device is found at dump time from the runtime's allocator of each device.
void record_segment(const Allocator* allocator, bool alloc, const void* ptr, int64_t nbytes);

/// One event, as the dump reads it.
enum class Action : uint8_t { kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kOom, kSnapshot };
std::string_view action_name(Action a);
struct Event {
  Action action = Action::kAlloc;
  Device device;                         // unless allocator is set
  const Allocator* allocator = nullptr;  // segment events: resolved to a device at dump time
  uint64_t addr = 0;
  int64_t size = 0;
  int64_t device_free = 0;  // oom
  int64_t time_us = 0;      // microseconds since the epoch (PyTorch's time_us)
  uint32_t frames = 0;      // index into Recorded::frames; 0: none
  Why why = Why::kNone;     // with frames: its first frame is "<why> <op>" (user_metadata)
};
/// A copy of what was recorded: the events in order, the frame lists they
/// index (frames[0] is the empty list), and the frames of every allocation
/// still live, by (device, address).
struct Recorded {
  struct Frame {
    std::string name;
    std::string filename;  // "dtr" (what dtr did), "op" (the op), "scope" (a trace::Scope)
  };
  HistorySettings settings;
  std::vector<Event> events;
  std::vector<std::vector<Frame>> frames;
  struct Live {
    Device device;
    uint64_t addr = 0;
    uint32_t frames = 0;
  };
  std::vector<Live> live;
};
Recorded recorded();
/// Adds a `snapshot` event for `device` (dump time).
void record_snapshot_event(Device device, int64_t allocated);

}  // namespace dtr::memory
