#include "core/memory_history.h"

#include <chrono>
#include <deque>
#include <mutex>
#include <utility>

#include <absl/container/flat_hash_map.h>

namespace dtr::memory {

namespace detail {
std::atomic<bool> g_recording{false};
}

std::string fmt_why(Why w, std::string_view op);

namespace {

struct State {
  std::mutex mu;
  HistorySettings settings;
  std::deque<Event> events;
  std::vector<std::vector<Recorded::Frame>> frames{{}};  // [0]: no frames
  absl::flat_hash_map<std::string, uint32_t> frame_ids;
  // Frames of each live allocation, by (device, address).
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, uint32_t> live;
};

// Never destroyed: DTR_MEMORY_SNAPSHOT dumps at exit, after static destructors may have run.
State& state() {
  static State* s = new State;
  return *s;
}

thread_local Why t_why = Why::kNone;
thread_local std::string_view t_why_op;
thread_local std::vector<std::string> t_scopes;

uint32_t device_key(Device d) { return (uint32_t(d.type) << 24) | uint32_t(d.index); }

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The frame list of an event now on this thread, interned; the caller holds mu.
uint32_t frames_locked(State& st, std::string_view op) {
  std::string key;
  key.reserve(64);
  key += why_name(t_why);
  key += '\x1f';
  key += t_why_op;
  key += '\x1f';
  key += op;
  for (const std::string& s : t_scopes) {
    key += '\x1f';
    key += s;
  }
  auto [it, fresh] = st.frame_ids.try_emplace(std::move(key), 0);
  if (!fresh) return it->second;
  std::vector<Recorded::Frame> f;
  if (t_why != Why::kNone) f.push_back({fmt_why(t_why, t_why_op), "dtr"});
  if (!op.empty()) f.push_back({std::string(op), "op"});
  for (auto s = t_scopes.rbegin(); s != t_scopes.rend(); ++s) f.push_back({*s, "scope"});
  it->second = uint32_t(st.frames.size());
  st.frames.push_back(std::move(f));
  return it->second;
}

Event event_now(Action action, Device device, uint64_t addr, int64_t size) {
  Event e;
  e.action = action;
  e.device = device;
  e.addr = addr;
  e.size = size;
  e.time_us = now_us();
  e.why = t_why;
  return e;
}

uint64_t address(const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }

void push_locked(State& st, Event e) {
  if (st.settings.enabled != RecordMode::kAll) return;
  if (st.settings.max_entries == 0) return;
  while (st.events.size() >= st.settings.max_entries) st.events.pop_front();
  st.events.push_back(e);
}

}  // namespace

std::string_view why_name(Why w) {
  switch (w) {
    case Why::kNone: return "";
    case Why::kEvict: return "evict";
    case Why::kRemat: return "remat";
    case Why::kReplayScratch: return "remat scratch";
    case Why::kSwapOut: return "swap out";
    case Why::kSwapIn: return "swap in";
  }
  return "";
}

std::string fmt_why(Why w, std::string_view op) {
  std::string s(why_name(w));
  s += ' ';
  s += op.empty() ? std::string_view("?") : op;
  return s;
}

std::string_view action_name(Action a) {
  switch (a) {
    case Action::kAlloc: return "alloc";
    case Action::kFreeRequested: return "free_requested";
    case Action::kFreeCompleted: return "free_completed";
    case Action::kSegmentAlloc: return "segment_alloc";
    case Action::kSegmentFree: return "segment_free";
    case Action::kOom: return "oom";
    case Action::kSnapshot: return "snapshot";
  }
  return "?";
}

void set_history(const HistorySettings& s) {
  State& st = state();
  std::lock_guard lock(st.mu);
  if (s.enabled == RecordMode::kOff) {
    st.events.clear();
    st.live.clear();
    st.frames.assign(1, {});
    st.frame_ids.clear();
  }
  if (s.enabled != RecordMode::kAll) st.events.clear();  // "state" keeps no trace
  st.settings = s;
  while (st.events.size() > s.max_entries) st.events.pop_front();
  detail::g_recording.store(s.enabled != RecordMode::kOff, std::memory_order_relaxed);
}

HistorySettings history() {
  State& st = state();
  std::lock_guard lock(st.mu);
  return st.settings;
}

WhyScope::WhyScope(Why why, std::string_view op) {
  if (!recording()) return;
  active_ = true;
  prev_why_ = t_why;
  prev_op_ = t_why_op;
  t_why = why;
  t_why_op = op;
}

WhyScope::~WhyScope() {
  if (!active_) return;
  t_why = prev_why_;
  t_why_op = prev_op_;
}

void push_scope(std::string_view name) { t_scopes.emplace_back(name); }
void pop_scope() {
  if (!t_scopes.empty()) t_scopes.pop_back();
}

void record_alloc(Device device, const void* ptr, int64_t nbytes, std::string_view op) {
  if (!recording()) return;
  State& st = state();
  std::lock_guard lock(st.mu);
  const ContextMode c = st.settings.context;
  const uint32_t f = c == ContextMode::kNone ? 0 : frames_locked(st, op);
  st.live[{device_key(device), address(ptr)}] = f;
  Event e = event_now(Action::kAlloc, device, address(ptr), nbytes);
  e.frames = c == ContextMode::kAlloc || c == ContextMode::kAll ? f : 0;
  push_locked(st, e);
}

void record_free(Device device, const void* ptr, int64_t nbytes, std::string_view op) {
  if (!recording()) return;
  State& st = state();
  std::lock_guard lock(st.mu);
  st.live.erase(std::pair{device_key(device), address(ptr)});
  if (st.settings.enabled != RecordMode::kAll) return;
  Event e = event_now(Action::kFreeRequested, device, address(ptr), nbytes);
  e.frames = st.settings.context == ContextMode::kAll ? frames_locked(st, op) : 0;
  push_locked(st, e);
  e.action = Action::kFreeCompleted;
  push_locked(st, e);
}

void record_oom(Device device, int64_t request, int64_t device_free, std::string_view op) {
  if (!recording()) return;
  State& st = state();
  std::lock_guard lock(st.mu);
  Event e = event_now(Action::kOom, device, 0, request);
  e.device_free = device_free;
  e.frames = st.settings.context == ContextMode::kAll ? frames_locked(st, op) : 0;
  push_locked(st, e);
}

void record_segment(const Allocator* allocator, bool alloc, const void* ptr, int64_t nbytes) {
  if (!recording()) return;
  State& st = state();
  std::lock_guard lock(st.mu);
  Event e = event_now(alloc ? Action::kSegmentAlloc : Action::kSegmentFree, Device(), address(ptr), nbytes);
  e.allocator = allocator;
  e.why = Why::kNone;
  push_locked(st, e);
}

void record_snapshot_event(Device device, int64_t allocated) {
  if (!recording()) return;
  State& st = state();
  std::lock_guard lock(st.mu);
  Event e = event_now(Action::kSnapshot, device, 0, allocated);
  e.why = Why::kNone;
  push_locked(st, e);
}

Recorded recorded() {
  State& st = state();
  std::lock_guard lock(st.mu);
  Recorded r;
  r.settings = st.settings;
  r.events.assign(st.events.begin(), st.events.end());
  r.frames = st.frames;
  r.live.reserve(st.live.size());
  for (const auto& [k, f] : st.live)
    r.live.push_back({Device(DeviceType(k.first >> 24), int(k.first & 0xFFFFFF)), k.second, f});
  return r;
}

}  // namespace dtr::memory
