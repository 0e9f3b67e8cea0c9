#include "remat/runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/logging.h"
#include "core/memory_history.h"
#include "core/op_registry.h"
#include "core/options.h"
#include "remat/memory_snapshot.h"
#include "remat/planner.h"
#include "remat/policy.h"
#include "remat/trace_file.h"
#include "remat/window.h"

namespace dtr::remat {

namespace {
std::atomic<int64_t> g_live_nodes{0};
}  // namespace

Node::Node() { g_live_nodes.fetch_add(1, std::memory_order_relaxed); }
// Dropping the last handle on a long lineage chain would destroy storage →
// producer node → input storage → ... recursively; a 100,000-op chain would
// overflow the stack. The outermost destructor drains a worklist instead.
Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  static thread_local std::vector<std::shared_ptr<Storage>>* pending = nullptr;
  if (pending != nullptr) {
    for (auto& in : inputs) pending->push_back(std::move(in));
    return;
  }
  std::vector<std::shared_ptr<Storage>> work(std::make_move_iterator(inputs.begin()),
                                             std::make_move_iterator(inputs.end()));
  pending = &work;
  while (!work.empty()) {
    std::shared_ptr<Storage> s = std::move(work.back());
    work.pop_back();
    s.reset();  // may run nested ~Node, which appends to `work`
  }
  pending = nullptr;
}
int64_t live_node_count() { return g_live_nodes.load(std::memory_order_relaxed); }

namespace {
thread_local std::string_view t_current_op;
}  // namespace
CurrentOpScope::CurrentOpScope(std::string_view op_name) : previous_(t_current_op) {
  t_current_op = op_name;
}
CurrentOpScope::~CurrentOpScope() { t_current_op = previous_; }
std::string_view CurrentOpScope::current() { return t_current_op; }

// ---- per-storage state --------------------------------------------------------

StorageState& add_state(Storage& s) {
  auto* st = new StorageState;  // deletes itself with the storage
  s.set_hook(st);
  return *st;
}

namespace {
// A storage and its state in one allocation. The storage is declared last
// so it is destroyed first: its destructor tells the state, which is still
// alive.
struct StorageBlock {
  StorageState st;
  Storage storage;
  StorageBlock(int64_t nbytes, Device device) : storage(nbytes, device) {
    st.embedded = true;
    storage.set_hook(&st);
  }
};
}  // namespace

std::shared_ptr<Storage> new_storage(int64_t nbytes, Device device) {
  auto block = std::make_shared<StorageBlock>(nbytes, device);
  Storage* s = &block->storage;
  return std::shared_ptr<Storage>(std::move(block), s);
}

// Note [per-device memory]: one device's accounting.
struct DeviceMemory {
  Device device;
  Runtime::Impl* rt = nullptr;
  Allocator* alloc = nullptr;
  std::optional<int64_t> budget;
  Stats stats;
  /// Resident, unlocked storages of this device that may be evicted (Note
  /// [what may be evicted]): the eviction candidates. A storage leaves while locked.
  CandidatePool pool;
  /// Every storage of this device whose bytes are accounted here.
  absl::flat_hash_set<Storage*> tracked;
  /// The device's link to host memory (its backend's host_link), and
  /// whether the host tier is on for it now (Note [host tier]).
  std::optional<HostLink> link;
  bool swap_on = false;
  /// Note [thrash guard]: per fresh op of the last Runtime::kThrashWindow
  /// (a ring, sized when the guard first counts), its estimated cost and the
  /// replays (count and cost) made after it; the window's sums; and the
  /// replays per op name, halved each time the ring wraps (for the report).
  struct ThrashSlot {
    double fresh_cost = 0;
    int64_t replays = 0;
    double replay_cost = 0;
  };
  std::vector<ThrashSlot> thrash_ring;
  size_t thrash_head = 0;
  int64_t window_fresh = 0, window_replays = 0;
  double window_fresh_cost = 0, window_replay_cost = 0;
  absl::flat_hash_map<std::string_view, int64_t> replays_by_op;
};

struct Runtime::Impl final : CandidateSync {
  explicit Impl(AllocatorProvider& a) : allocators(a) {}

  mutable std::recursive_mutex mu;
  AllocatorProvider& allocators;
  int64_t clock = 0;
  /// One entry per device seen (a handful at most: found by a scan).
  /// Mutable: a const query of a device not seen yet creates its entry.
  mutable std::vector<std::unique_ptr<DeviceMemory>> devices;
  /// The global runtime resolves DTR_MEMORY_BUDGET for each device as it
  /// first sees it; other runtimes start unlimited.
  bool budgets_from_options = false;
  /// Some device has a budget: the policy's bookkeeping is kept (else it is
  /// built when the first budget is set, reseat_policy).
  bool any_budget = false;
  Heuristic heuristic = Heuristic::kDtrEq;
  std::unique_ptr<EvictionPolicy> policy = make_policy(Heuristic::kDtrEq);
  SampleMode sample = SampleMode::kAuto;
  SwapMode swap_mode = SwapMode::kAuto;
  int64_t min_evict_bytes = 0;
  double thrash_limit = 0;  // Note [thrash guard]; 0: off
  uint64_t sample_state = 0x9E3779B97F4A7C15ull;  // fixed: decisions reproduce run to run
  bool verify = false;
  // Note [planner]: told of every op-path call (the recorder), and whether
  // the bytes are simulated (never read or copied).
  RuntimeObserver* observer = nullptr;
  bool simulated = false;
  // Chrome trace events (DTR_TRACE), written as they happen; null = off.
  std::unique_ptr<TraceFile> trace;
  uint64_t trace_generation = 0;  // bumped by every file opened
  // DTR_TRACE could not be opened when the global runtime was built: thrown
  // (once) by the first op, so start-up itself cannot fail half-way.
  std::string trace_open_error;
  // Storage ids of the trace (a storage's address may be reused); live
  // tracked storages only.
  absl::flat_hash_map<const Storage*, uint64_t> trace_ids;
  uint64_t next_trace_id = 0;

  // CandidateSync: a policy hook changed what a score of `s` reads; its
  // entry is in its own device's pool.
  void sync(Storage& s) override {
    if (StorageState* st = static_cast<StorageState*>(s.hook()); st && st->memory) st->memory->pool.sync(s);
  }

  DeviceMemory& memory(Device d) const {
    for (const auto& m : devices)
      if (m->device == d) return *m;
    return add_device(d);
  }
  DeviceMemory& add_device(Device d) const;

  static StorageState& st(Storage& s) { return state(s); }
  static const StorageState& st(const Storage& s) { return *find_state(s); }
  static DeviceMemory* memory_of(const Storage& s) {
    const StorageState* p = find_state(s);
    return p ? p->memory : nullptr;
  }

  void trace_event(std::string_view json) {
    if (trace) trace->write(json);
  }
  // Chrome counter tracks are keyed by name: the default device's is
  // "memory", another device's "memory <device>".
  void trace_counter(const DeviceMemory& m) {
    if (!trace) return;
    const std::string name = m.device == default_device() ? std::string("memory")
                                                           : fmt::format("memory {}", m.device.str());
    trace_event(fmt::format(
        R"({{"name":"{}","ph":"C","ts":{:.3f},"pid":1,"tid":{},"args":{{"resident_bytes":{},"budget_bytes":{}}}}})",
        name, trace_now_us(), trace_thread_id(), m.stats.resident_bytes, m.budget.value_or(0)));
  }
  uint64_t trace_id(const Storage& s) {
    if (memory_of(s) == nullptr || memory_of(s)->rt != this) return 0;  // not accounted here
    auto [it, fresh] = trace_ids.try_emplace(&s, 0);
    if (fresh) it->second = ++next_trace_id;
    return it->second;
  }
  // An error the runtime throws, as an instant event, flushed at once: the
  // file must hold it even if nothing catches the error.
  void trace_error(std::string_view kind, std::string_view message, const DeviceMemory* m) {
    if (!trace) return;
    trace_event(fmt::format(
        R"({{"name":"{}","cat":"error","ph":"i","s":"g","ts":{:.3f},"pid":1,"tid":{},"args":{{"message":"{}","device":"{}","resident_bytes":{},"budget_bytes":{}}}}})",
        kind, trace_now_us(), trace_thread_id(), json_escape(message),
        m ? m->device.str() : std::string("?"), m ? m->stats.resident_bytes : 0,
        m && m->budget ? *m->budget : 0));
    trace->flush();
  }
  [[noreturn]] void throw_oom_error(std::string message, const DeviceMemory& m, int64_t request = 0) {
    trace_error("OutOfMemoryError", message, &m);
    if (recording_history()) {
      const int64_t free = m.budget ? *m.budget - m.stats.resident_bytes : 0;
      memory::record_oom(m.device, request, std::max<int64_t>(0, free), CurrentOpScope::current());
    }
    throw OutOfMemoryError(std::move(message));
  }
  void open_trace(const std::string& path) {
    trace.reset();  // closes the old file
    trace_ids.clear();
    owner->tracing_.store(false, std::memory_order_relaxed);
    if (path.empty()) return;
    trace = std::make_unique<TraceFile>(path);  // throws ValueError naming the path
    ++trace_generation;
    owner->tracing_.store(true, std::memory_order_relaxed);
  }
  void throw_deferred_error() {
    if (trace_open_error.empty()) return;
    std::string message = std::move(trace_open_error);
    trace_open_error.clear();
    throw ValueError(std::move(message));
  }

  static bool replayable(const Storage& s) {
    const StorageState* p = find_state(s);
    return p != nullptr && !p->constant && p->producer != nullptr && p->producer->replayable;
  }
  // Note [host tier]: its bytes may be copied to host memory to make room
  // (any accounted storage on a device whose host tier is on, constants
  // included, except a borrowed one: those bytes are the user's).
  static bool swappable(const Storage& s) {
    const StorageState* p = find_state(s);
    return p != nullptr && p->memory != nullptr && p->memory->swap_on && !p->borrowed;
  }
  static bool swapped(const Storage& s) { return is_swapped(s); }

  // In use by an op (locked) or by a consumer outside the runtime (pinned,
  // Note [pin guard]): the bytes stay where they are.
  static bool held(const StorageState& state) { return state.lock_count > 0 || state.pin_count > 0; }

  void pool_add(Storage& s) {
    StorageState& state = st(s);
    if (held(state) || !s.resident() || state.memory == nullptr || !(replayable(s) || swappable(s))) return;
    state.memory->pool.add(s);
  }
  // Whether free_if_unused could free `s`: no user or frame holds it and
  // lineage can rebuild it.
  static bool unused(Storage& s) {
    return !held(st(s)) && s.handle_count.load() == 0 && replayable(s);
  }
  // Eager eviction (DTR paper §3): the bytes of a storage that no user
  // handle, op or pin holds go at once when lineage can rebuild them.
  void free_if_unused(Storage& s) {
    if (!unused(s)) return;
    if (s.resident()) {
      eager_free(s);
    } else if (swapped(s)) {  // its host copy goes too: it is evicted now
      release_host_copy(s);
      if (any_budget) policy->on_evict(s, *this);
      ++memory_of(s)->stats.eager_frees;
    }
  }
  void pool_remove(Storage& s) {
    if (DeviceMemory* m = memory_of(s)) m->pool.remove(s);
  }

  // Every lock and unlock goes through these: a locked storage is not a
  // candidate, so it leaves the pool, and comes back with its new last access.
  void lock(Storage& s) {
    if (st(s).lock_count++ == 0) pool_remove(s);
  }
  void unlock(Storage& s, int64_t now) {
    StorageState& state = st(s);
    --state.lock_count;
    state.last_access = now;
    if (state.lock_count == 0) pool_add(s);
  }

  static void track_bytes(DeviceMemory& m, Storage& s) {
    ++m.stats.allocations;
    m.stats.resident_bytes += s.nbytes();
    m.stats.peak_bytes = std::max(m.stats.peak_bytes, m.stats.resident_bytes);
  }
  void free_bytes(Storage& s) {
    pool_remove(s);
    if (s.resident()) {
      if (DeviceMemory* m = memory_of(s)) {
        m->stats.resident_bytes -= s.nbytes();
        if (recording_history()) memory::record_free(m->device, s.data(), s.nbytes(), CurrentOpScope::current());
      }
      s.free_data();
    }
    if (swapped(s)) release_host_copy(s);
  }

  // ---- the host tier (Note [host tier]) ------------------------------------
  DeviceMemory& host_memory() { return memory(Device(kCPU)); }
  // Bytes the host tier can take now without going over the cpu budget.
  int64_t host_room() {
    const DeviceMemory& h = host_memory();
    return h.budget ? *h.budget - h.stats.resident_bytes : std::numeric_limits<int64_t>::max();
  }
  // Frees the host copy of a swapped storage (used again, destroyed, or
  // dropped because lineage can rebuild it).
  void release_host_copy(Storage& s) {
    StorageState& state = st(s);
    DeviceMemory& h = host_memory();
    if (recording_history()) memory::record_free(h.device, state.host_data, s.nbytes(), CurrentOpScope::current());
    h.alloc->deallocate(state.host_data, size_t(s.nbytes()));
    state.host_data = nullptr;
    h.stats.resident_bytes -= s.nbytes();
    h.stats.host_tier_bytes -= s.nbytes();
    if (state.memory) state.memory->stats.swapped_bytes -= s.nbytes();
  }
  // Makes room by copying the bytes of `s` to host memory and freeing them
  // on the device. Returns false, changing nothing, when the host tier has
  // no bytes for it (the caller then evicts, or looks further).
  bool swap_out(Storage& s) {
    DeviceMemory& m = *memory_of(s);
    DeviceMemory& h = host_memory();
    const int64_t n = s.nbytes();
    void* p = h.budget ? h.alloc->allocate_within(size_t(n), std::max<int64_t>(0, *h.budget - h.stats.resident_bytes - n))
                       : h.alloc->allocate(size_t(n));
    if (p == nullptr) return false;
    // DTR_VERIFY: a copy back must equal what went out. The bytes now, not
    // those of the first computation: a constant may have been written in
    // place since (an optimizer's state).
    if (verify && !simulated) st(s).verify_hash = hash_bytes(s);
    if (!simulated) {
      const Backend& b = backend(s.device());
      b.copy_to_host(s.device().index, p, s.data(), size_t(n));
      // The device bytes are freed next: the copy must have read them.
      if (b.synchronize) b.synchronize(s.device().index);
    }
    debug_rate_limited(debug_limit, "swap out storage {} ({} bytes, from {}) on {} to host memory",
                       fmt::ptr(&s), n, producer_name(s), m.device.str());
    const memory::WhyScope why(memory::Why::kSwapOut, producer_name(s));
    free_bytes(s);
    st(s).host_data = p;
    track_bytes(h, s);
    if (recording_history()) memory::record_alloc(h.device, p, n, CurrentOpScope::current());
    h.stats.host_tier_bytes += n;
    m.stats.swapped_bytes += n;
    ++m.stats.swap_outs;
    m.stats.swap_bytes_out += n;
    m.stats.swap_seconds_estimated += m.link ? m.link->seconds(double(n)) : 0.0;
    if (trace) {
      trace_event(fmt::format(
          R"({{"name":"swap out","cat":"remat","ph":"i","s":"t","ts":{:.3f},"pid":1,"tid":{},"args":{{"storage":{},"bytes":{},"op":"{}"}}}})",
          trace_now_us(), trace_thread_id(), trace_id(s), n, producer_name(s)));
      trace_counter(m);
    }
    return true;
  }
  // Brings a swapped storage back: bytes on its device (under its budget,
  // making room as any allocation does), the copy, the host copy freed.
  // On an error the storage stays swapped.
  void swap_in(Storage& s) {
    DeviceMemory& m = *memory_of(s);
    const int64_t n = s.nbytes();
    const auto t0 = std::chrono::steady_clock::now();
    const memory::WhyScope why(memory::Why::kSwapIn, producer_name(s));
    allocate(s);
    if (!simulated) {
      const Backend& b = backend(s.device());
      b.copy_from_host(s.device().index, s.data(), st(s).host_data, size_t(n));
      if (b.synchronize) b.synchronize(s.device().index);  // the host copy is freed next
    }
    release_host_copy(s);
    ++m.stats.swap_ins;
    m.stats.swap_bytes_in += n;
    m.stats.swap_seconds_estimated += m.link ? m.link->seconds(double(n)) : 0.0;
    st(s).last_access = clock;
    if (verify && st(s).verify_hash != 0 && hash_bytes(s) != st(s).verify_hash) swap_verify_failed(s);
    debug_rate_limited(debug_limit, "swap in storage {} ({} bytes) on {}", fmt::ptr(&s), n, m.device.str());
    if (trace) {
      const auto t1 = std::chrono::steady_clock::now();
      trace_event(fmt::format(
          R"({{"name":"swap in","cat":"remat","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":1,"tid":{},"args":{{"storages":[{}],"bytes":{}}}}})",
          trace_us(t0), std::chrono::duration<double, std::micro>(t1 - t0).count(), trace_thread_id(),
          trace_id(s), n));
      trace_counter(m);
    }
    pool_add(s);
  }
  // Frees the host copy of the swapped storage with lineage whose
  // recomputation costs least per byte; false when none has lineage. Runs
  // only when the cpu budget has nothing else left to evict.
  bool drop_a_host_copy() {
    Storage* best = nullptr;
    double best_cost = 0;
    for (const auto& d : devices) {
      if (!d->link) continue;
      for (Storage* s : d->tracked) {
        if (!swapped(*s) || !replayable(*s)) continue;
        const double c = local_cost(*s) / double(std::max<int64_t>(s->nbytes(), 1));
        // Ties go to the older producer: the choice must not depend on the hash set's order.
        if (best == nullptr || c < best_cost ||
            (c == best_cost && producer(*s)->tick < producer(*best)->tick)) {
          best = s;
          best_cost = c;
        }
      }
    }
    if (best == nullptr) return false;
    const memory::WhyScope why(memory::Why::kEvict, producer_name(*best));
    release_host_copy(*best);
    if (any_budget) policy->on_evict(*best, *this);
    ++memory_of(*best)->stats.evictions;
    return true;
  }
  // Makes `s` resident if its bytes are in the host tier.
  void swap_in_if_swapped(Storage& s) {
    if (swapped(s)) swap_in(s);
  }
  // Turns the host tier of `m` on or off (swap mode, host link): a
  // constant is a candidate only while it is on.
  void apply_swap_mode(DeviceMemory& m) {
    m.swap_on = swap_mode == SwapMode::kAuto && m.link.has_value();
    m.pool.set_host_link(m.swap_on ? m.link : std::nullopt);
    // Members keep their order, newcomers follow by last access: pool order
    // breaks ties between equal scores, so it must not follow addresses.
    std::vector<Storage*> order(m.tracked.begin(), m.tracked.end());
    std::sort(order.begin(), order.end(), [](const Storage* a, const Storage* b) {
      const int64_t ia = st(*a).pool_index, ib = st(*b).pool_index;
      if ((ia >= 0) != (ib >= 0)) return ia >= 0;
      if (ia != ib) return ia < ib;
      if (st(*a).last_access != st(*b).last_access) return st(*a).last_access < st(*b).last_access;
      return a->nbytes() < b->nbytes();
    });
    for (Storage* s : order) pool_remove(*s);
    for (Storage* s : order) pool_add(*s);
  }

  // Note [staleness buckets] (remat/policy.h): the buckets by their bound,
  // lowest first, each walked from its oldest while no later candidate of
  // it can beat best(); consider(c) scores one. At most kIndexWalk
  // candidates per bucket.
  static constexpr int kIndexWalk = 32;
  template <typename Consider, typename Best>
  void search_index(const CandidatePool& pool, EvictionPolicy::StalenessBound bound, Consider&& consider,
                    Best&& best) const {
    const bool one = bound == EvictionPolicy::StalenessBound::kOne;
    struct Entry {
      double bound;
      int32_t bucket, head;
    };
    std::array<Entry, CandidatePool::kBuckets> order;
    size_t k = 0;
    pool.for_each_bucket([&](int b, int32_t head) {
      const double floor = one ? 1.0 : CandidatePool::bucket_floor(b);
      order[k++] = Entry{floor / staleness(pool[size_t(head)], clock), b, head};
    });
    std::sort(order.begin(), order.begin() + ptrdiff_t(k),
              [](const Entry& a, const Entry& b) { return a.bound < b.bound || (a.bound == b.bound && a.bucket < b.bucket); });
    for (size_t e = 0; e < k; ++e) {
      if (order[e].bound >= best()) break;
      const double floor = one ? 1.0 : CandidatePool::bucket_floor(order[e].bucket);
      int32_t i = order[e].head;
      for (int walked = 0; i >= 0 && walked < kIndexWalk; ++walked, i = pool.next_in_bucket(i)) {
        const Candidate& c = pool[size_t(i)];
        if (floor / staleness(c, clock) >= best()) break;  // the rest are fresher and no cheaper
        consider(c);
      }
    }
  }

  // Note [scores]: the policy's score; the lowest is evicted. With kSqrt,
  // a deterministic sample of ceil(sqrt(n)) candidates (the DTR paper's
  // sampling), prefetched in batches so the misses overlap, but never fewer
  // than kMinSample: a pool of a few hundred (a typical training step) is
  // searched in full or nearly, where a sample of 20 picks poor victims that
  // come straight back (measured: train_gpt at 0.3 of its peak fails with a
  // pure sqrt(n) sample and runs with 128).
  static constexpr size_t kMinSample = 128;
  struct Victim {
    Storage* s = nullptr;
    bool swap = false;  // copy its bytes to host memory, else evict (Note [host tier])
  };
  // `host_room`: what the host tier can take now. A candidate that does not
  // fit there is priced by recomputation alone, or passed over when it has
  // no lineage (the host tier is full: fall back to recomputation).
  // `c` as a victim is priced (nullopt: it may not be chosen): storages
  // below DTR_MIN_EVICT_BYTES never are, and one whose bytes the host tier
  // has no room for is priced by recomputation alone, or passed over when
  // it has no lineage.
  std::optional<Candidate> priced(const Candidate& c, int64_t host_room) const {
    if (c.nbytes < min_evict_bytes) return std::nullopt;
    if (c.nbytes <= host_room || c.swap_seconds == std::numeric_limits<double>::infinity()) return c;
    if (!c.replayable) return std::nullopt;
    Candidate no_room = c;
    no_room.swap_seconds = std::numeric_limits<double>::infinity();
    return no_room;
  }
  Victim choose_victim(const CandidatePool& pool, int64_t host_room) {
    Candidate best;
    bool found = false;
    double best_score = 0;
    auto take = [&](const Candidate& c) {
      const double sc = policy->score(c, clock);
      if (!found || sc < best_score) {
        best = c;
        found = true;
        best_score = sc;
      }
    };
    auto consider = [&](const Candidate& c) {
      if (c.nbytes < min_evict_bytes) return;
      if (c.nbytes > host_room && c.swap_seconds != std::numeric_limits<double>::infinity()) [[unlikely]] {
        if (const std::optional<Candidate> no_room = priced(c, host_room)) take(*no_room);
        return;
      }
      take(c);
    };
    const size_t n = pool.size();
    const EvictionPolicy::StalenessBound bound = policy->staleness_bound();
    const bool indexed = bound != EvictionPolicy::StalenessBound::kNone &&
                         (sample == SampleMode::kIndex || (sample == SampleMode::kAuto && n >= kIndexMinCandidates));
    if (indexed) {
      search_index(pool, bound, consider, [&] { return found ? best_score : std::numeric_limits<double>::infinity(); });
    } else if (sample != SampleMode::kAll && n > kMinSample) {
      const auto k = std::max(kMinSample, size_t(std::ceil(std::sqrt(double(n)))));
      constexpr size_t kBatch = 16;
      size_t idx[kBatch];
      for (size_t done = 0; done < k; done += kBatch) {
        const size_t m = std::min(kBatch, k - done);
        for (size_t i = 0; i < m; ++i) {
          sample_state ^= sample_state << 13;
          sample_state ^= sample_state >> 7;
          sample_state ^= sample_state << 17;
          idx[i] = size_t((unsigned __int128)sample_state * n >> 64);  // in [0, n), no division
          __builtin_prefetch(&pool[idx[i]]);
        }
        for (size_t i = 0; i < m; ++i) consider(pool[idx[i]]);
      }
    }
    if (!found) {  // exhaustive (kAll, a small pool, or an unlucky sample)
      for (const Candidate& c : pool) consider(c);
    }
    if (!found) return {};
    return Victim{best.s, policy->restore_choice(best) == EvictionPolicy::Restore::kSwap};
  }

  // The last handle went: the bytes go at once (eager eviction). The
  // policy's classes only matter under a budget; without one they are
  // built when a budget is set (reseat_policy), which keeps the unlimited
  // case free of that bookkeeping.
  void eager_free(Storage& s) {
    free_bytes(s);
    if (any_budget) policy->on_evict(s, *this);
    if (DeviceMemory* m = memory_of(s)) ++m->stats.eager_frees;
  }

  // Rebuilds the policy's bookkeeping from scratch: every storage without
  // bytes that lineage can recompute joins its class.
  void reseat_policy() {
    policy = make_policy(heuristic);
    reseat_policy_state();
  }
  void reseat_policy_state() {
    for (const auto& m : devices)
      for (Storage* s : m->tracked) st(*s).policy = PolicyState{};
    // In lineage order, not the hash set's (addresses): the order of the
    // unions decides how class costs are summed (Note [planner]).
    std::vector<Storage*> evicted;
    for (const auto& m : devices)
      for (Storage* s : m->tracked)
        if (!s->resident() && !swapped(*s) && replayable_lineage(*s)) evicted.push_back(s);
    std::sort(evicted.begin(), evicted.end(), [](const Storage* a, const Storage* b) {
      const int64_t ta = producer(*a)->tick, tb = producer(*b)->tick;
      if (ta != tb) return ta < tb;
      if (a->nbytes() != b->nbytes()) return a->nbytes() < b->nbytes();
      return st(*a).last_access < st(*b).last_access;
    });
    for (Storage* s : evicted) policy->on_evict(*s, *this);
    for (const auto& m : devices)
      for (Storage* s : m->tracked) m->pool.sync(*s);
  }
  // Has a replayable producer (a constant or not).
  static bool replayable_lineage(const Storage& s) {
    const Node* p = producer(s);
    return p != nullptr && p->replayable;
  }

  static std::string_view producer_name(const Storage& s) {
    const Node* p = producer(s);
    return p ? p->op_name : std::string_view("?");
  }

  void evict(Storage& s) {
    DeviceMemory& m = *memory_of(s);
    debug_rate_limited(debug_limit, "evict storage {} ({} bytes, from {}) on {}: {} bytes resident, budget {} bytes",
                       fmt::ptr(&s), s.nbytes(), producer_name(s), m.device.str(),
                       m.stats.resident_bytes, m.budget.value_or(-1));
    {
      const memory::WhyScope why(memory::Why::kEvict, producer_name(s));
      free_bytes(s);
    }
    policy->on_evict(s, *this);
    ++m.stats.evictions;
    if (trace) {
      trace_event(fmt::format(
          R"({{"name":"evict","cat":"remat","ph":"i","s":"t","ts":{:.3f},"pid":1,"tid":{},"args":{{"storage":{},"bytes":{},"op":"{}"}}}})",
          trace_now_us(), trace_thread_id(), trace_id(s), s.nbytes(), producer_name(s)));
      trace_counter(m);
    }
  }

  // FNV-1a over the bytes, read through the backend: in place where the
  // host can address device memory, else from a host copy.
  static uint64_t hash_bytes(const Storage& s) {
    const Backend& b = backend(s.device());
    std::vector<unsigned char> host;
    const auto* p = static_cast<const unsigned char*>(s.data());
    if (!b.host_accessible) {
      host.resize(size_t(s.nbytes()));
      b.copy_to_host(s.device().index, host.data(), s.data(), host.size());
      if (b.synchronize) b.synchronize(s.device().index);
      p = host.data();
    }
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < s.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h | 1;  // never 0 (0 = no hash)
  }

  [[noreturn]] void swap_verify_failed(const Storage& s) {
    std::string message = fmt::format(
        "DTR_VERIFY: storage of {} bytes on {} (from {}) copied back from host memory differs from the "
        "bytes copied out (host tier, Note [host tier])\nplease report",
        s.nbytes(), s.device().str(), producer(s) ? producer_name(s) : std::string_view("a constant"));
    trace_error("InternalError", message, memory_of(s));
    throw InternalError(std::move(message));
  }
  [[noreturn]] void verify_failed(const Storage& s) {
    std::string trail;
    const Node* n = producer(s);
    for (int depth = 0; n != nullptr && depth < 16; ++depth) {
      trail += fmt::format("\n    {}{}", std::string(size_t(depth) * 2, ' '), n->op_name);
      n = n->inputs.empty() ? nullptr : producer(*n->inputs[0]);
    }
    std::string message = fmt::format(
        "DTR_VERIFY: rematerialized storage of {} bytes on {} differs from its first computation "
        "(replay is not bitwise equal); op trail (producer first):{}\nplease report",
        s.nbytes(), s.device().str(), trail);
    trace_error("InternalError", message, memory_of(s));
    throw InternalError(std::move(message));
  }

  // "replaying 'exp', needed by 'mul'": the chain of replays of the
  // rematerialization in progress, from the top frame (the replay being
  // prepared) down to the storage that was asked for; empty when none.
  std::string remat_chain() const {
    if (remat_stack == nullptr || remat_stack->empty()) return {};
    std::vector<std::string_view> chain;
    for (size_t i = remat_stack->size() - 1; i != kNoParent; i = (*remat_stack)[i].parent)
      chain.push_back(producer_name(*(*remat_stack)[i].s));
    std::string names;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (chain.size() > 8 && i == 4) {  // the first four and the last three
        names += fmt::format(", ... ({} more)", chain.size() - 7);
        i = chain.size() - 3;
      }
      names += fmt::format("{}'{}'", i == 0 ? "" : ", needed by ", chain[i]);
    }
    return fmt::format("replaying {}; work stack depth {}", names, remat_stack->size());
  }

  // " while running op 'matmul'", plus the rematerialization in progress,
  // for the OutOfMemoryError report.
  std::string oom_context() const {
    std::string out;
    const std::string_view op = CurrentOpScope::current();
    if (!op.empty()) out = fmt::format(" while running op '{}'", op);
    const std::string chain = remat_chain();
    if (chain.empty()) return out;
    return out + fmt::format(", during a rematerialization ({})", chain);
  }

  // Bytes of `m` held locked by the rematerialization in progress: inputs
  // kept resident for pending replays and the outputs of the replay being
  // prepared.
  int64_t remat_locked_bytes(const DeviceMemory& m) const {
    if (remat_stack == nullptr) return 0;
    absl::flat_hash_set<const Storage*> seen;
    int64_t bytes = 0;
    auto count = [&](const Storage* s) {
      if (s->resident() && memory_of(*s) == &m && st(*s).lock_count > 0 && seen.insert(s).second)
        bytes += s->nbytes();
    };
    for (const RematFrame& f : *remat_stack)
      for (const Storage* s : f.locked) count(s);
    if (replaying != nullptr) {
      for (const auto& w : replaying->outputs)
        if (auto o = w.lock()) count(o.get());
    }
    return bytes;
  }

  [[noreturn]] void throw_oom(DeviceMemory& m, int64_t request) {
    // floor: bytes that cannot be evicted now (constants, storages in use
    // and pinned ones); small: evictable storages below DTR_MIN_EVICT_BYTES,
    // never chosen.
    int64_t locked = 0, pinned = 0, unevictable = 0, floor = 0, small = 0;
    std::vector<const Storage*> fixed, in_use_list, pinned_list;
    // A constant the host tier could take is not fixed (Note [host tier]).
    const int64_t room = m.swap_on ? host_room() : 0;
    const auto fixed_here = [&](const Storage& s) {
      return !replayable(s) && !(swappable(s) && s.nbytes() <= room);
    };
    for (const Storage* s : m.tracked) {
      if (!s->resident()) continue;
      const bool in_use = st(*s).lock_count > 0;
      const bool is_pinned = st(*s).pin_count > 0;
      if (in_use) {
        locked += s->nbytes();
        in_use_list.push_back(s);
      }
      if (is_pinned) {
        pinned += s->nbytes();
        pinned_list.push_back(s);
      }
      if (fixed_here(*s)) {
        unevictable += s->nbytes();
        fixed.push_back(s);
      }
      if (in_use || is_pinned || fixed_here(*s)) {
        floor += s->nbytes();
      } else if (s->nbytes() < min_evict_bytes) {
        small += s->nbytes();
      }
    }
    auto largest = [](std::vector<const Storage*>& v) {
      std::sort(v.begin(), v.end(), [](const Storage* a, const Storage* b) {
        return a->nbytes() != b->nbytes() ? a->nbytes() > b->nbytes()
                                          : st(*a).last_access > st(*b).last_access;
      });
      std::string out;
      for (size_t i = 0; i < std::min<size_t>(v.size(), 5); ++i) {
        const Storage* s = v[i];
        const Node* p = producer(*s);
        out += fmt::format("\n    {} bytes from {}", s->nbytes(),
                           p ? std::string(p->op_name) : std::string("a constant (parameter or input)"));
      }
      return out.empty() ? std::string(" (none)") : out;
    };
    const std::string pinned_report =
        pinned > 0 ? "\nLargest pinned storages (held outside the runtime, e.g. DLPack exports):" +
                         largest(pinned_list)
                   : std::string();
    throw_oom_error(fmt::format(
        "out of memory under the budget of {}{}: budget {} bytes, request {} bytes, resident {} bytes, "
        "locked {} bytes, pinned {} bytes, unevictable {} bytes; nothing left to evict.\n{}{}\nLargest "
        "unevictable storages:{}\nLargest locked (in use) storages:{}{}",
        m.device.str(), oom_context(), *m.budget, request, m.stats.resident_bytes, locked, pinned,
        unevictable, oom_advice(m, request, floor, unevictable, pinned, small), host_tier_report(m),
        largest(fixed), largest(in_use_list), pinned_report), m, request);
  }
  // Both tiers for the OutOfMemoryError report: what this device has in
  // host memory, and what the host tier holds against the cpu budget.
  std::string host_tier_report(DeviceMemory& m) {
    if (m.device.is_cpu()) {
      if (m.stats.host_tier_bytes == 0) return {};
      return fmt::format("\nHost tier: {} of the resident bytes hold other devices' swapped storages.",
                         m.stats.host_tier_bytes);
    }
    if (!m.link) return {};
    if (!m.swap_on) {
      return fmt::format("\nHost tier: off (DTR_SWAP=off; {} bytes of {} still in host memory until used); "
                         "DTR_SWAP=auto lets constants go to host memory.",
                         m.stats.swapped_bytes, m.device.str());
    }
    const DeviceMemory& h = host_memory();
    return fmt::format(
        "\nHost tier: {} bytes of {} swapped to host memory; host memory holds {} bytes (host tier {} bytes) "
        "under a cpu budget of {}.",
        m.stats.swapped_bytes, m.device.str(), h.stats.resident_bytes, h.stats.host_tier_bytes,
        h.budget ? fmt::format("{} bytes", *h.budget) : std::string("none"));
  }

  // What would help, from the never-evictable floor (constants plus
  // storages in use) against the budget.
  std::string oom_advice(const DeviceMemory& m, int64_t request, int64_t floor, int64_t constants,
                         int64_t pinned, int64_t small) const {
    const int64_t need = floor + request;
    std::string out = fmt::format(
        "Never-evictable floor: {} bytes (constants {} bytes, pinned {} bytes, the rest locked in "
        "use); floor plus request: {} bytes, and no budget below that can run this op at this point.",
        floor, constants, pinned, need);
    const int64_t held = remat_locked_bytes(m);
    const std::string other =
        heuristic == Heuristic::kMsps ? std::string("dtr_eq") : std::string("msps");
    if (constants + request > *m.budget) {
      out += fmt::format(
          " The constants alone (parameters, inputs, optimizer state: {} bytes) and the request "
          "exceed the budget: no eviction heuristic can fit this; raise the budget to at least {} "
          "bytes or hold fewer constants.",
          constants, need);
    } else if (pinned > 0 && constants + pinned + request > *m.budget) {
      out += fmt::format(
          " The pinned storages ({} bytes: a consumer outside the runtime holds a pointer to them, "
          "e.g. a DLPack export whose deleter has not run) and the constants leave no room: let "
          "the consumers release them, or raise the budget to at least {} bytes.",
          pinned, need);
    } else if (held > 0) {
      out += fmt::format(
          " {} of the locked bytes are held by the rematerialization in progress (inputs kept for "
          "pending replays), so the floor is not the limit by itself: another heuristic may fit "
          "(DTR_HEURISTIC={} or remat::Runtime::set_heuristic; now {}), or raise the budget to at "
          "least {} bytes.",
          held, other, heuristic_name(heuristic), need);
    } else {
      out += fmt::format(" Raise the budget to at least {} bytes", need);
      if (small > 0) {
        out += fmt::format(", or lower DTR_MIN_EVICT_BYTES ({} bytes): {} bytes of storages below it "
                           "are never evicted",
                           min_evict_bytes, small);
      }
      out += ".";
    }
    return out;
  }

  // Evicts storages of `m` (and only of `m`: Note [per-device memory])
  // until `request` more bytes fit under its budget.
  // Note [hard budget]: where the allocator keeps an account of its
  // blocks (memory_stats), what it holds beyond the resident storage bytes:
  // its rounding of the blocks handed out (and any block it handed out that
  // this runtime does not count). 0 for an allocator without stats.
  static int64_t allocator_overhead(const DeviceMemory& m) {
    const std::optional<AllocatorStats> a = m.alloc ? m.alloc->memory_stats() : std::nullopt;
    return a ? std::max<int64_t>(0, a->allocated_bytes - m.stats.resident_bytes) : 0;
  }
  // The same plus the rounding of a request of `request` bytes: what the
  // budget must leave room for beside resident + request.
  static int64_t rounding_bytes(const DeviceMemory& m, int64_t request) {
    const std::optional<AllocatorStats> a = m.alloc ? m.alloc->memory_stats() : std::nullopt;
    if (!a) return 0;
    const int64_t rounded = request > 0 ? m.alloc->rounded_bytes(size_t(request)) : 0;
    return std::max<int64_t>(0, a->allocated_bytes - m.stats.resident_bytes) +
           std::max<int64_t>(0, rounded - request);
  }

  // Frees the bytes of `victim` on `m`: copied to host memory where that is
  // the cheaper way back and the host tier takes them, else evicted.
  void take_victim(DeviceMemory& m, const Victim& victim) {
    if (victim.swap && swap_out(*victim.s)) return;
    if (!replayable(*victim.s)) {
      // The host allocator failed within the cpu budget: the system is out of memory.
      throw_oom_error(fmt::format("host memory could not take {} bytes swapped out of {} ({} bytes in the "
                                  "host tier){}",
                                  victim.s->nbytes(), m.device.str(), host_memory().stats.host_tier_bytes,
                                  oom_context()),
                      m);
    }
    evict(*victim.s);
  }

  // Evicts storages of `m` (and only of `m`: Note [per-device memory])
  // until `request` more bytes fit under its budget, the allocator's
  // rounding counted (Note [hard budget]).
  void make_room(DeviceMemory& m, int64_t request) {
    if (!m.budget) return;
    while (m.stats.resident_bytes + request + rounding_bytes(m, request) > *m.budget) {
      const Victim victim =
          choose_victim(m.pool, m.swap_on ? host_room() : std::numeric_limits<int64_t>::max());
      if (victim.s == nullptr) {
        // The host's own allocation comes first: a host copy that lineage
        // can rebuild goes, and its storage is evicted (Note [host tier]).
        if (m.device.is_cpu() && m.stats.host_tier_bytes > 0 && drop_a_host_copy()) continue;
        throw_oom(m, request);
      }
      take_victim(m, victim);
    }
  }

  // Note [fragmentation-aware eviction]: the allocator of `m` could not
  // give `request` bytes although the budget has room (or there is none):
  // its free bytes are scattered, or the device is full. Evicts the
  // cheapest window of adjacent blocks that frees a contiguous range of
  // the rounded request, where the allocator tells its layout and such a
  // window exists; else the policy's victim. False when nothing is left
  // to evict.
  bool evict_for_allocation(DeviceMemory& m, int64_t request) {
    const int64_t room = m.swap_on ? host_room() : std::numeric_limits<int64_t>::max();
    const std::vector<MemorySegmentLayout> layout = m.alloc->layout_for(size_t(request));
    if (!layout.empty()) {
      // This path is rare: a map from the candidates' bytes to their slots, built afresh.
      absl::flat_hash_map<const void*, size_t> slot_of;
      slot_of.reserve(m.pool.size());
      for (size_t i = 0; i < m.pool.size(); ++i) slot_of.emplace(m.pool[i].s->data(), i);
      std::vector<WindowSegment> segments(layout.size());
      for (size_t i = 0; i < layout.size(); ++i) {
        segments[i].reserve(layout[i].size());
        for (const MemoryBlock& b : layout[i]) {
          WindowBlock w{.size = b.size, .kind = b.allocated ? WindowBlock::kPinned : WindowBlock::kFree};
          if (auto it = b.allocated ? slot_of.find(b.ptr) : slot_of.end(); it != slot_of.end()) {
            if (const std::optional<Candidate> c = priced(m.pool[it->second], room)) {
              const double score = policy->score(*c, clock);
              if (!std::isnan(score) && score != std::numeric_limits<double>::infinity()) {
                w.kind = WindowBlock::kEvictable;
                w.score = std::max(score, 0.0);
                w.id = int64_t(it->second);
              }
            }
          }
          segments[i].push_back(w);
        }
      }
      const std::optional<EvictionWindow> window =
          cheapest_window(segments, m.alloc->rounded_bytes(size_t(request)));
      if (window && window->evicted_bytes > 0) {
        // The victims first, then their eviction: each one changes the pool.
        std::vector<Victim> victims;
        for (size_t i = window->begin; i < window->end; ++i) {
          const WindowBlock& w = segments[window->segment][i];
          if (w.kind != WindowBlock::kEvictable) continue;
          const Candidate c = *priced(m.pool[size_t(w.id)], room);
          victims.push_back(Victim{c.s, policy->restore_choice(c) == EvictionPolicy::Restore::kSwap});
        }
        debug_rate_limited(debug_limit,
                           "evict a window of {} storages ({} bytes of {} adjacent) on {} for {} bytes: "
                           "the allocator's free bytes are scattered",
                           victims.size(), window->evicted_bytes, window->bytes, m.device.str(), request);
        for (const Victim& v : victims) take_victim(m, v);
        ++m.stats.window_evictions;
        return true;
      }
    }
    const Victim victim = choose_victim(m.pool, room);
    if (victim.s == nullptr) return false;
    take_victim(m, victim);
    return true;
  }

  // Bytes for a storage of `n` bytes on `m`. Under a budget, the allocator
  // keeps cached no more than the budget leaves beside the resident bytes,
  // its rounding and these (trim_cache), so its reserved bytes stay within
  // the budget (Note [hard budget]).
  void* allocate_bytes(DeviceMemory& m, int64_t n) {
    if (!m.budget) return m.alloc->allocate(size_t(n));
    const int64_t left = *m.budget - m.stats.resident_bytes - n - rounding_bytes(m, n);
    return m.alloc->allocate_within(size_t(n), std::max<int64_t>(0, left));
  }

  // The allocator had no bytes for `request` and nothing is left to evict.
  [[noreturn]] void throw_allocator_oom(DeviceMemory& m, int64_t request) {
    std::string held;
    if (const std::optional<AllocatorStats> a = m.alloc->memory_stats()) {
      const auto mib = [](int64_t n) {
        if (n >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", double(n) / double(int64_t{1} << 20));
        if (n >= 1024) return fmt::format("{:.1f} KiB", double(n) / 1024.0);
        return fmt::format("{} bytes", n);
      };
      held = fmt::format(
          "; {} free in reserved segments but the largest free block is {} (fragmentation {:.2f}; {} "
          "reserved in {} segments, {} allocated); nothing left to evict",
          mib(a->free_bytes), mib(a->largest_free_block), dtr::fragmentation(*a), mib(a->reserved_bytes), a->segments,
          mib(a->allocated_bytes));
    }
    throw_oom_error(fmt::format("{} could not allocate {} bytes ({} bytes resident){}{}", m.device.str(), request,
                                m.stats.resident_bytes, held, oom_context()),
                    m, request);
  }

  // Freed blocks an allocator caches are memory too: under a budget,
  // resident plus cached bytes stay within it (Note [hard budget]), the
  // cached ones beyond it going back to the system (cpu/host_allocator.h).
  // Without a budget, or within it, the cache keeps its blocks.
  static void trim_cache(DeviceMemory& m) {
    if (!m.budget || m.alloc == nullptr) return;
    const int64_t over =
        m.stats.resident_bytes + allocator_overhead(m) + m.alloc->cached_bytes() - *m.budget;
    if (over > 0) m.alloc->release_cached(over);
  }

  void allocate(Storage& s) {
    DTR_INTERNAL_ASSERT(!s.resident(), "allocate on a resident storage");
    DeviceMemory& m = memory(s.device());  // DeviceError for a device that does not exist
    make_room(m, s.nbytes());
    void* p = allocate_bytes(m, s.nbytes());
    // Within the budget, the allocator may still have no block for it
    // (Note [fragmentation-aware eviction]).
    while (p == nullptr) {
      if (!evict_for_allocation(m, s.nbytes())) throw_allocator_oom(m, s.nbytes());
      p = allocate_bytes(m, s.nbytes());
    }
    s.set_data(p, m.alloc);
    StorageState& state = st(s);
    if (state.memory == nullptr) {
      state.memory = &m;
      m.tracked.insert(&s);
    }
    track_bytes(m, s);
    if (recording_history()) memory::record_alloc(m.device, p, s.nbytes(), CurrentOpScope::current());
  }

  // Unlocks a rematerialization frame's inputs once its replay is done. An
  // input no user holds (an intermediate brought back only to rebuild
  // something else) is freed as soon as nothing uses it: eager eviction, as
  // for any storage whose last handle went (DTR paper §3), instead of
  // sitting in the budget until the heuristic picks it. Not while another
  // reader's result is still to be rebuilt (Note [remat intermediates]):
  // it stays, evictable, for that rebuild.
  void unlock_all(std::vector<Storage*>& v, int64_t now) {
    for (Storage* s : v) {
      unlock(*s, now);
      // The cheap test first: a parameter's readers are every step's ops.
      if (unused(*s) && !needed_again(*s)) free_if_unused(*s);
    }
    v.clear();
  }


  // Note [remat intermediates]. Whether a result of another reader of `s`
  // is evicted (not resident, not swapped) and will be rebuilt: a user
  // holds it, or a frame of the rematerialization in progress is to
  // rebuild it. Its rebuild would need `s` again. An LSTM cell's gates feed
  // four activations, which a rebuild of the hidden state needs one frame
  // after another and backward one op after another; freeing the gates
  // after the first made each of the others rebuild them, and the hidden
  // state before them, again: exponential in the depth of the evicted chain.
  static bool needed_again(const Storage& s) {
    for (const auto& w : st(s).consumers) {
      const std::shared_ptr<Node> n = w.lock();
      if (!n) continue;
      for (const auto& ow : n->outputs) {
        const std::shared_ptr<Storage> o = ow.lock();
        if (!o || o.get() == &s || o->resident() || swapped(*o)) continue;
        if (o->handle_count.load() > 0 || st(*o).remat_frames > 0) return true;
      }
    }
    return false;
  }

  // Rematerializes `target` and everything it needs, with an explicit work
  // stack: a chain of 100,000 evicted ops needs no native recursion.
  void rematerialize(Storage& target) {
    using Frame = RematFrame;
    std::vector<Frame> stack;
    std::vector<Storage*> missing;
    push_frame(stack, &target, kNoParent);
    // The OutOfMemoryError report reads the stack while this runs.
    struct StackScope {
      std::vector<RematFrame>*& slot;
      std::vector<RematFrame>* previous;
      ~StackScope() { slot = previous; }
    } stack_scope{remat_stack, remat_stack};
    remat_stack = &stack;
    try {
      while (!stack.empty()) {
        const size_t top = stack.size() - 1;
        Storage* s = stack[top].s;
        if (s->resident()) {  // a sibling output of an earlier replay
          finish_frame(stack);
          continue;
        }
        if (swapped(*s)) {  // Note [host tier]: copied back, not recomputed
          swap_in(*s);
          finish_frame(stack);
          continue;
        }
        Node* node = st(*s).producer.get();
        DTR_INTERNAL_ASSERT(node != nullptr && node->replayable,
                            "storage of {} bytes is not resident and has no replayable producer",
                            s->nbytes());
        // Inputs that are resident stay unlocked (evictable) while the
        // missing ones are rematerialized, so locked bytes do not pile up
        // along a deep recomputation; only a finished input is held, by the
        // frame that reads it. Before the replay every input is checked
        // again: one evicted meanwhile gets its own frame. Each round holds
        // at least one more input, so this ends.
        //
        // The most recently produced missing input goes first (on top): an
        // earlier input is often on its lineage (a residual block's skip
        // input feeds its other branch), so it comes back as a by-product,
        // unlocked, instead of being held while the other branch is rebuilt.
        //
        // A swapped input (a constant has no producer) goes deepest: its
        // copy back needs nothing else, so it comes last and is held least.
        missing.clear();
        for (const auto& in : node->inputs)
          if (!in->resident()) missing.push_back(in.get());
        if (!missing.empty()) {
          std::stable_sort(missing.begin(), missing.end(), [](const Storage* a, const Storage* b) {
            const auto tick = [](const Storage* x) {
              return swapped(*x) ? std::numeric_limits<int64_t>::min() : producer(*x)->tick;
            };
            return tick(a) < tick(b);
          });
          for (Storage* in : missing) push_frame(stack, in, top);
          continue;
        }
        for (const auto& in : node->inputs) {
          lock(*in);
          stack[top].locked.push_back(in.get());
        }
        replay(*node);
        finish_frame(stack);
      }
    } catch (const OutOfMemoryError&) {
      // Its report names the rematerialization already (oom_context).
      abandon(stack);
      throw;
    } catch (...) {
      // Any other error from a replay (a kernel, a device, DTR_VERIFY)
      // keeps its type and says what was being rebuilt, for which op.
      const std::string context = remat_error_context(target);
      abandon(stack);
      rethrow_with_context(context);
    }
  }

  // "\n  (raised while rematerializing a storage of 4096 bytes on cpu produced
  // by 'exp', replaying 'exp', needed by 'mul'; for op 'sum')".
  std::string remat_error_context(const Storage& target) const {
    const std::string_view op = CurrentOpScope::current();
    return fmt::format(
        "\n  (raised while rematerializing a storage of {} bytes on {} produced by '{}', {}; {})",
        target.nbytes(), target.device().str(), producer_name(target), remat_chain(),
        op.empty() ? std::string("reading a tensor's data") : fmt::format("for op '{}'", op));
  }

  static constexpr size_t kNoParent = ~size_t{0};
  struct RematFrame {
    Storage* s;
    size_t parent;  // index of the frame whose replay needs s (kNoParent for target)
    std::vector<Storage*> locked;  // inputs held resident for this frame's replay
  };
  /// The work stack of the rematerialization in progress, or null; the node
  /// whose replay is allocating its outputs, or null. Read by throw_oom.
  std::vector<RematFrame>* remat_stack = nullptr;
  const Node* replaying = nullptr;

  template <typename Frames>
  static void push_frame(Frames& stack, Storage* s, size_t parent) {
    stack.push_back(RematFrame{s, parent, {}});
    ++st(*s).remat_frames;
  }
  // A failed rematerialization: every frame's inputs are unlocked (and
  // freed where nothing else will rebuild from them).
  template <typename Frames>
  void abandon(Frames& stack) {
    for (auto& f : stack) --st(*f.s).remat_frames;
    for (auto& f : stack) unlock_all(f.locked, clock);
  }

  // Pops the top frame (whose storage is resident) and hands it, locked, to
  // its parent frame: the one whose replay reads it. (Not simply the frame
  // below, which may be a sibling input: it would unlock this storage after
  // its own replay, and the parent's output allocation could then evict it.)
  template <typename Frames>
  void finish_frame(Frames& stack) {
    auto& f = stack.back();
    Storage* s = f.s;
    const size_t parent = f.parent;
    --st(*s).remat_frames;
    unlock_all(f.locked, clock);
    stack.pop_back();
    if (parent != kNoParent) {
      lock(*s);
      stack[parent].locked.push_back(s);
    }
  }

  // ---- Note [thrash guard] ----------------------------------------------------
  // A fresh op (a lineage node recorded) on `m`: the window moves by one.
  void count_fresh(DeviceMemory& m, double cost) {
    ++m.stats.fresh_ops;
    if (thrash_limit <= 0 || !m.budget) return;
    if (m.thrash_ring.empty()) m.thrash_ring.resize(Runtime::kThrashWindow);
    m.thrash_head = (m.thrash_head + 1) % m.thrash_ring.size();
    if (m.thrash_head == 0) {  // wrapped: older replays count half in the report
      for (auto it = m.replays_by_op.begin(); it != m.replays_by_op.end();) {
        it->second /= 2;
        if (it->second == 0) {
          m.replays_by_op.erase(it++);
        } else {
          ++it;
        }
      }
    }
    DeviceMemory::ThrashSlot& slot = m.thrash_ring[m.thrash_head];
    if (m.window_fresh == int64_t(m.thrash_ring.size())) {  // the oldest fresh op leaves
      m.window_fresh_cost = std::max(0.0, m.window_fresh_cost - slot.fresh_cost);
      m.window_replays -= slot.replays;
      m.window_replay_cost = std::max(0.0, m.window_replay_cost - slot.replay_cost);
    } else {
      ++m.window_fresh;
    }
    slot = {cost, 0, 0};
    m.window_fresh_cost += cost;
  }
  void reset_thrash_window(DeviceMemory& m) {
    for (auto& slot : m.thrash_ring) slot = {};
    m.window_fresh = m.window_replays = 0;
    m.window_fresh_cost = m.window_replay_cost = 0;
    m.replays_by_op.clear();
  }
  // Before replaying `node` on `m`: throws ThrashError when this replay
  // takes the window past the limit, in count and in cost.
  void check_thrash(DeviceMemory& m, const Node& node) {
    if (thrash_limit <= 0 || !m.budget) return;
    if (m.thrash_ring.empty()) m.thrash_ring.resize(Runtime::kThrashWindow);
    DeviceMemory::ThrashSlot& slot = m.thrash_ring[m.thrash_head];
    ++slot.replays;
    slot.replay_cost += node.cost_seconds;
    ++m.window_replays;
    m.window_replay_cost += node.cost_seconds;
    ++m.replays_by_op[node.op_name];
    const double fresh = double(std::max<int64_t>(m.window_fresh, Runtime::kThrashMinFresh));
    const double ratio = double(m.window_replays) / fresh;
    m.stats.max_replay_ratio = std::max(m.stats.max_replay_ratio, ratio);
    if (ratio <= thrash_limit) return;
    // The cost too: replaying many cheap ops for a few expensive fresh ones
    // is not thrashing. With fewer fresh ops than the floor, their cost is
    // scaled up to it; with none, the count alone decides.
    const double fresh_cost =
        m.window_fresh > 0 ? m.window_fresh_cost * fresh / double(m.window_fresh) : 0.0;
    const double cost_ratio = fresh_cost > 0 ? m.window_replay_cost / fresh_cost
                                             : std::numeric_limits<double>::infinity();
    if (cost_ratio <= thrash_limit) return;
    throw_thrash(m, ratio, cost_ratio);
  }
  static std::string human_bytes(int64_t n) {
    return fmt::format("{:.1f} MiB ({} bytes)", double(n) / (1024.0 * 1024.0), n);
  }
  [[noreturn]] void throw_thrash(DeviceMemory& m, double ratio, double cost_ratio) {
    int64_t locked = 0;
    for (const Storage* s : m.tracked)
      if (s->resident() && (st(*s).lock_count > 0 || st(*s).pin_count > 0)) locked += s->nbytes();
    std::vector<std::pair<std::string_view, int64_t>> top(m.replays_by_op.begin(), m.replays_by_op.end());
    std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    std::string ops;
    for (size_t i = 0; i < std::min<size_t>(top.size(), 5); ++i)
      ops += fmt::format("{}'{}' {} times", i == 0 ? "" : ", ", top[i].first, top[i].second);
    std::string message = fmt::format(
        "thrashing under the budget of {}{}: {} ops replayed for the last {} fresh ops, a replay/fresh "
        "ratio of {:.1f} (estimated cost ratio {:.1f}), over the limit of {} (DTR_THRASH_LIMIT); budget "
        "{}, resident {}, locked {}. Replayed most: {}. The budget is too small for this program to make "
        "progress: raise DTR_MEMORY_BUDGET (remat::set_memory_budget), or raise DTR_THRASH_LIMIT "
        "(remat::Runtime::set_thrash_limit; 0 turns the guard off) to keep replaying.",
        m.device.str(), oom_context(), m.window_replays, m.window_fresh, ratio,
        cost_ratio == std::numeric_limits<double>::infinity() ? ratio : cost_ratio, thrash_limit,
        human_bytes(*m.budget), human_bytes(m.stats.resident_bytes), human_bytes(locked), ops);
    reset_thrash_window(m);  // going on (under a larger budget) starts afresh
    trace_error("ThrashError", message, &m);
    throw ThrashError(std::move(message));
  }

  void replay(Node& node) {
    check_thrash(memory(node.device), node);
    std::vector<Storage*> outs;
    std::vector<std::shared_ptr<Storage>> keep;  // live outputs and scratch
    std::vector<std::shared_ptr<Storage>> scratch;
    outs.reserve(node.outputs.size());
    int64_t restored = 0;
    replaying = &node;
    try {
      for (const auto& w : node.outputs) {
        std::shared_ptr<Storage> o = w.lock();
        // An output that left this lineage since (made a constant by
        // register_constant, data_ptr or a detach: a leaf's gradient that
        // is a sibling output of a backward op) keeps its bytes: scratch.
        const bool ours = o != nullptr && producer(*o) == &node;
        if (ours && !o->resident() && !swapped(*o)) {
          const memory::WhyScope why(memory::Why::kRemat, node.op_name);
          allocate(*o);
          lock(*o);
          ++restored;
          outs.push_back(o.get());
          keep.push_back(std::move(o));
        } else {
          // Gone, resident (possibly being read elsewhere), swapped (its
          // bytes come back from the host tier when used) or no longer
          // ours: replay into scratch.
          const Storage* ref = o ? o.get() : nullptr;
          DTR_INTERNAL_ASSERT(ref != nullptr || !node.outputs.empty(), "no outputs");
          // A gone output's size is unknown here; the node remembers it.
          const int64_t nbytes = ref ? ref->nbytes() : node.output_nbytes.at(outs.size());
          auto tmp = new_storage(nbytes, ref ? ref->device() : node.device);
          const memory::WhyScope why(memory::Why::kReplayScratch, node.op_name);
          allocate(*tmp);
          lock(*tmp);
          outs.push_back(tmp.get());
          scratch.push_back(std::move(tmp));
        }
      }
      replaying = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<Storage*> ins;
      ins.reserve(node.inputs.size());
      for (const auto& in : node.inputs) ins.push_back(in.get());
      node.recompute(ins, outs);
      const auto t1 = std::chrono::steady_clock::now();
      Stats& stats = memory(node.device).stats;
      stats.recompute_seconds_measured += std::chrono::duration<double>(t1 - t0).count();
      stats.recompute_seconds_estimated += node.cost_seconds;
      ++stats.recomputed_ops;
      stats.recomputed_flops += node.flops;
      stats.rematerializations += restored;
      if (trace) {
        std::vector<uint64_t> ids;
        int64_t bytes = 0;
        for (const auto& o : keep) {
          ids.push_back(trace_id(*o));
          bytes += o->nbytes();
        }
        trace_event(fmt::format(
            R"({{"name":"rematerialize {}","cat":"remat","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":1,"tid":{},"args":{{"storages":[{}],"bytes":{}}}}})",
            node.op_name, trace_us(t0), std::chrono::duration<double, std::micro>(t1 - t0).count(),
            trace_thread_id(), fmt::join(ids, ","), bytes));
        trace_counter(memory(node.device));
      }
    } catch (...) {
      replaying = nullptr;
      // The outputs' bytes were never written: free them (they go back to
      // evicted; none of them is in the pool while locked).
      for (Storage* o : outs) --st(*o).lock_count;
      const memory::WhyScope why(memory::Why::kReplayScratch, node.op_name);
      for (auto& o : keep) free_bytes(*o);
      for (auto& t : scratch) free_bytes(*t);
      throw;
    }
    for (auto& o : keep) {
      if (verify && st(*o).verify_hash != 0 && hash_bytes(*o) != st(*o).verify_hash)
        verify_failed(*o);
      policy->on_rematerialize(*o, *this);
      debug_rate_limited(debug_limit, "rematerialized storage {} ({} bytes) by replaying {}",
                         fmt::ptr(o.get()), o->nbytes(), node.op_name);
    }
    for (Storage* o : outs) unlock(*o, clock);
    if (!scratch.empty()) {
      const memory::WhyScope why(memory::Why::kReplayScratch, node.op_name);
      for (auto& t : scratch) free_bytes(*t);
    }
  }
  // Note [mutation], the cheap way: walks the lineage downstream of a
  // mutated constant through `readers`. A result that a user holds, or that
  // an op is using now, keeps its bytes and becomes a constant. A result no
  // user holds is only there for others' lineage, which this detach cuts:
  // its bytes (if any) are freed and its lineage dropped, and the walk goes
  // on through its readers. A result with no bytes that a user still holds
  // would need the old value: fail. Returns false, changing nothing, then.
  bool detach_dependants(const std::vector<std::shared_ptr<Node>>& readers) {
    std::vector<std::shared_ptr<Node>> work = readers;
    absl::flat_hash_set<const Node*> seen;
    std::vector<std::shared_ptr<Storage>> to_keep, to_drop;
    while (!work.empty()) {
      std::shared_ptr<Node> n = std::move(work.back());
      work.pop_back();
      if (!seen.insert(n.get()).second) continue;
      for (const auto& w : n->outputs) {
        std::shared_ptr<Storage> o = w.lock();
        if (!o || producer(*o) != n.get()) continue;
        const bool user_held = o->handle_count.load() > 0;
        // Bytes in the host tier are bytes too: a swapped result stays swapped, a constant.
        if ((o->resident() || swapped(*o)) && (user_held || held(st(*o)))) {
          to_keep.push_back(std::move(o));
          continue;
        }
        if (user_held) return false;
        for (const auto& cw : st(*o).consumers)
          if (auto c = cw.lock()) work.push_back(std::move(c));
        to_drop.push_back(std::move(o));
      }
    }
    for (auto& o : to_keep) {
      pool_remove(*o);
      st(*o).constant = true;
      st(*o).producer.reset();
      pool_add(*o);  // a candidate again where the host tier can take constants
    }
    for (auto& o : to_drop) {
      if (o->resident() || swapped(*o)) {
        free_bytes(*o);
        if (DeviceMemory* m = memory_of(*o)) ++m->stats.eager_frees;
      } else {
        policy->on_destroy(*o, *this);  // leaves its equivalence class
      }
      st(*o).producer.reset();
    }
    return true;
  }


  std::shared_ptr<Storage> before_mutation(const std::shared_ptr<Storage>& s, bool keep_old);

  Runtime* owner = nullptr;
  // The global runtime's allocations and frees go to dtr::memory's history
  // while it records (Note [memory snapshots]); a planner's simulation does not.
  bool history = false;
  bool recording_history() const { return memory::recording() && history; }
  // Budget changes, evictions, rematerializations (Note [debug logging]).
  LogRateLimit debug_limit{100};
};

DeviceMemory& Runtime::Impl::add_device(Device d) const {
  auto m = std::make_unique<DeviceMemory>();
  m->device = d;
  m->rt = const_cast<Impl*>(this);
  m->alloc = allocators.allocator(d);  // DeviceError for a device that does not exist
  DTR_INTERNAL_ASSERT(m->alloc != nullptr, "no allocator for {}", d.str());
  if (const Backend* b = find_backend(d.type); b != nullptr && b->host_link != nullptr) {
    m->link = b->host_link(d.index);
    m->swap_on = swap_mode == SwapMode::kAuto;
    m->pool.set_host_link(m->swap_on ? m->link : std::nullopt);
  }
  if (budgets_from_options) {
    // DTR_MEMORY_BUDGET, resolved against this device's own memory ("60%").
    const MemoryBudget spec = global_options().memory_budget.for_device(d, d == default_device());
    m->budget = spec.resolve(backend(d).memory_bytes(d.index));
    m->stats.budget_bytes = m->budget.value_or(-1);
  }
  devices.push_back(std::move(m));
  DeviceMemory& out = *devices.back();
  if (out.budget && !any_budget) {
    auto* self = const_cast<Impl*>(this);
    self->any_budget = true;
    self->reseat_policy_state();
  }
  return out;
}

void StorageState::on_storage_destroyed(Storage& s) {
  if (memory != nullptr) {
    Runtime::Impl& rt = *memory->rt;
    std::lock_guard lock(rt.mu);
    if (rt.observer) rt.observer->on_destroy(s);
    rt.policy->on_destroy(s, rt);
    memory->tracked.erase(&s);
    rt.trace_ids.erase(&s);
    rt.free_bytes(s);
    memory = nullptr;
  }
  if (!embedded) delete this;
}

Runtime& Runtime::global() {
  // Note [environment at start-up]: global_options() does not throw for a
  // malformed variable (the first op reports it), so this initializer only
  // applies values already checked; should anything in it throw, nothing is
  // kept and the next call starts afresh.
  static Runtime* rt = [] {
    auto r = std::make_unique<Runtime>();  // never destroyed: storages may outlive static destruction
    r->impl_->history = true;
    const Options& o = global_options();
    // Each device's budget, when first seen; DTR_PLAN records the run with
    // none and only plans DTR_MEMORY_BUDGET (Note [planner]).
    r->impl_->budgets_from_options = o.plan_path.empty();
    for (const std::string& line : unusable_budget_entries(o.memory_budget)) logger().warn("{}", line);
    r->set_heuristic(o.heuristic);
    r->set_sample_mode(o.sample);
    r->set_min_evict_bytes(o.min_evict_bytes);
    r->set_cost_model(o.cost);
    r->set_verify(o.verify);
    r->set_swap_mode(o.swap);
    r->set_thrash_limit(o.thrash_limit);
    if (!o.plan_path.empty()) start_program_plan(*r, o.plan_path);
    if (!o.memory_snapshot_path.empty()) memory::set_snapshot_at_exit(o.memory_snapshot_path);
    if (!o.trace_path.empty()) {
      try {
        r->set_trace_path(o.trace_path);  // closed at exit, on std::terminate and on signals (remat/trace_file.h)
      } catch (const ValueError& e) {
        r->impl_->trace_open_error = e.what();
      }
    }
    return r.release();
  }();
  return *rt;
}

Runtime::Runtime(AllocatorProvider& allocators, std::unique_ptr<EvictionPolicy> policy)
    : impl_(std::make_unique<Impl>(allocators)) {
  impl_->owner = this;
  if (policy) impl_->policy = std::move(policy);
}

Runtime::~Runtime() {
  std::lock_guard lock(impl_->mu);
  for (const auto& m : impl_->devices)
    for (Storage* s : m->tracked)
      if (Impl::swapped(*s)) impl_->release_host_copy(*s);
  for (const auto& m : impl_->devices)
    for (Storage* s : m->tracked) Impl::st(*s).memory = nullptr;
  impl_->trace.reset();
}

void Runtime::set_memory_budget(Device device, std::optional<int64_t> bytes) {
  DTR_CHECK(!bytes || *bytes > 0, ValueError,
            "set_memory_budget: the budget must be positive, got {} bytes", bytes.value_or(0));
  std::lock_guard lock(impl_->mu);
  DeviceMemory& m = impl_->memory(device);  // DeviceError for a device that does not exist
  debug_rate_limited(impl_->debug_limit, "memory budget of {} {} -> {} bytes (-1: unlimited), {} bytes resident",
                     device.str(), m.budget.value_or(-1), bytes.value_or(-1), m.stats.resident_bytes);
  m.budget = bytes;
  m.stats.budget_bytes = bytes.value_or(-1);
  impl_->reset_thrash_window(m);  // Note [thrash guard]: a new budget, a new window
  if (bytes && !impl_->any_budget) {
    impl_->any_budget = true;
    impl_->reseat_policy();
  }
  if (bytes) {
    try {
      impl_->make_room(m, 0);
    } catch (const OutOfMemoryError&) {
      if (!impl_->simulated)
        logger().warn("new budget of {} ({} bytes) is below the unevictable resident bytes ({} resident)",
                    device.str(), *bytes, m.stats.resident_bytes);
    }
    // Blocks cached while unlimited (or under a larger budget), and those
    // just evicted, go back beyond the new budget now.
    Impl::trim_cache(m);
  }
}

std::optional<int64_t> Runtime::memory_budget(Device device) const {
  std::lock_guard lock(impl_->mu);
  return impl_->memory(device).budget;
}

void Runtime::set_memory_budget(std::optional<int64_t> bytes) { set_memory_budget(default_device(), bytes); }
std::optional<int64_t> Runtime::memory_budget() const { return memory_budget(default_device()); }

void Runtime::acquire(std::span<Storage* const> storages) {
  std::lock_guard lock(impl_->mu);
  impl_->throw_deferred_error();
  size_t done = 0;
  try {
    for (; done < storages.size(); ++done) {
      Storage* s = storages[done];
      if (!s->resident()) impl_->rematerialize(*s);
      impl_->lock(*s);
    }
  } catch (...) {
    for (size_t i = 0; i < done; ++i) impl_->unlock(*storages[i], impl_->clock);
    throw;
  }
  if (impl_->observer) impl_->observer->on_acquire(storages);
}

void Runtime::release(std::span<Storage* const> storages) {
  std::lock_guard lock(impl_->mu);
  for (Storage* s : storages) {
    impl_->unlock(*s, impl_->clock);
    impl_->free_if_unused(*s);
  }
  if (impl_->observer) impl_->observer->on_release(storages);
}

void Runtime::allocate(Storage& s) {
  std::lock_guard lock(impl_->mu);
  impl_->throw_deferred_error();
  impl_->allocate(s);
  impl_->lock(s);
  if (impl_->observer) impl_->observer->on_allocate(s);
}
// Note [borrowed storage]. The bytes of a from_blob tensor are the user's:
// PyTorch's from_blob aliases them, so a write to the buffer is a write to
// the tensor, and the program may refill the buffer (a staging buffer) at
// any time. Lineage must therefore never read a borrowed storage later: a
// replay would compute from whatever the buffer holds then, and a
// rematerialized value would silently differ (Note [replay equals
// original]). A node that reads a borrowed storage directly is not kept:
// its outputs are constants with no lineage (they hold the values
// computed from the buffer as it was when the op ran), and everything
// downstream is rebuilt from those stable copies. The cost is that these
// direct dependants count against the budget and are never evicted.
// Views of a borrowed tensor share its storage, so they are covered; an
// in-place op on one writes into the buffer (as in PyTorch) like any
// constant's (Note [mutation]).
void Runtime::record(const std::shared_ptr<Node>& node) {
  std::lock_guard lock(impl_->mu);
  node->tick = ++impl_->clock;
  impl_->count_fresh(impl_->memory(node->device), node->cost_seconds);
  impl_->memory(node->device).stats.fresh_flops += node->flops;
  const bool reads_borrowed = std::any_of(node->inputs.begin(), node->inputs.end(),
                                          [](const auto& in) {
                                            const StorageState* s = find_state(*in);
                                            return s != nullptr && s->borrowed;
                                          });
  for (const auto& w : node->outputs) {
    std::shared_ptr<Storage> o = w.lock();
    if (!o) continue;
    StorageState& os = Impl::st(*o);
    if (reads_borrowed) {
      impl_->pool_remove(*o);
      os.verify_hash = 0;  // a constant is never replayed; an in-place write left the old hash
      os.constant = true;
      os.producer.reset();
      os.last_access = impl_->clock;
      continue;
    }
    if (impl_->verify && o->resident()) os.verify_hash = Impl::hash_bytes(*o);
    os.producer = node;
    os.last_access = impl_->clock;
    if (!node->replayable) os.constant = true;
    impl_->pool_add(*o);
  }
  if (!reads_borrowed) {  // else the node is dropped: nothing reads through it
    for (const auto& in : node->inputs) {
      auto& c = Impl::st(*in).consumers;
      if (c.size() == c.capacity() && c.size() >= 8) {
        c.erase(std::remove_if(c.begin(), c.end(), [](const auto& w) { return w.expired(); }),
                c.end());
      }
      c.push_back(node);
    }
  }
  if (impl_->observer) impl_->observer->on_record(*node);
}

void Runtime::register_constant(Storage& s) {
  std::lock_guard lock(impl_->mu);
  StorageState& st = Impl::st(s);
  // Its bytes must be here for good: bring them back before dropping
  // lineage (from the host tier too: the caller may read them next).
  if (!s.resident() && (st.producer != nullptr || Impl::swapped(s))) impl_->rematerialize(s);
  impl_->pool_remove(s);
  st.constant = true;
  st.producer.reset();
  st.verify_hash = 0;  // never replayed; the bytes may differ from the first computation (in-place writes)
  impl_->pool_add(s);  // a constant stays a candidate where the host tier is on
  if (impl_->observer) impl_->observer->on_register_constant(s);
}

void Runtime::mark_borrowed(Storage& s) {
  std::lock_guard lock(impl_->mu);
  StorageState& st = Impl::st(s);
  impl_->swap_in_if_swapped(s);  // the caller writes through a pointer to the bytes next
  DTR_INTERNAL_ASSERT(s.resident() || st.producer == nullptr,
                      "mark_borrowed on a storage whose bytes are not here");
  impl_->pool_remove(s);
  st.constant = true;
  st.producer.reset();
  st.borrowed = true;
  if (impl_->observer) impl_->observer->on_mark_borrowed(s);
}

std::shared_ptr<Storage> Runtime::before_mutation(const std::shared_ptr<Storage>& s, bool keep_old) {
  std::lock_guard lock(impl_->mu);
  std::shared_ptr<Storage> old = impl_->before_mutation(s, keep_old);
  if (impl_->observer) impl_->observer->on_before_mutation(*s, keep_old, old.get());
  return old;
}

std::shared_ptr<Storage> Runtime::Impl::before_mutation(const std::shared_ptr<Storage>& s, bool keep_old) {
  StorageState& sst = st(*s);
  // The write needs the bytes here (the op path has acquired them already).
  swap_in_if_swapped(*s);
  std::vector<std::shared_ptr<Node>> readers;
  for (const auto& w : sst.consumers)
    if (auto n = w.lock()) readers.push_back(std::move(n));
  sst.consumers.clear();
  const bool has_lineage = Impl::replayable(*s);
  if (readers.empty() && !has_lineage && !keep_old) return nullptr;

  // A constant (a parameter under an optimizer step) whose readers' results
  // are still resident: rather than copy its old bytes, detach those results
  // from their lineage (they become constants) when no evicted tensor a user
  // holds needs the old value. Detaching costs no bytes now (the results are
  // resident already); it only takes them out of the evictable pool, while
  // a copy would add an unevictable storage at once.
  if (!has_lineage && !keep_old && detach_dependants(readers)) {
    pool_remove(*s);
    sst.policy.evicted_neighbours.clear();
    return nullptr;
  }

  // The old bytes move to a new storage `old`; lineage that read them now
  // reads `old`. If `s` was computed by a replayable op, `old` inherits that
  // lineage and needs no bytes now; otherwise (a constant) it gets a copy.
  auto old = new_storage(s->nbytes(), s->device());
  StorageState& ost = st(*old);
  if (has_lineage) {
    // Accounted here from the start (as a storage whose bytes were evicted),
    // so its destruction is seen like any other's (Note [planner]).
    DeviceMemory& m = memory(old->device());
    ost.memory = &m;
    m.tracked.insert(old.get());
    ost.producer = sst.producer;
    for (auto& w : ost.producer->outputs) {
      if (w.lock() == s) w = old;
    }
  } else {
    allocate(*old);
    if (!simulated) copy_bytes(old->device(), old->data(), s->device(), s->data(), size_t(s->nbytes()));
    ost.constant = true;
    pool_add(*old);  // swappable where the host tier is on
  }
  for (auto& n : readers) {
    for (auto& in : n->inputs)
      if (in == s) in = old;
    ost.consumers.push_back(n);
  }
  pool_remove(*s);
  sst.producer.reset();
  // s has neither readers nor a producer now: its evicted neighbours are
  // old's, and a later in-place op starts its list afresh.
  sst.policy.evicted_neighbours.clear();
  return old;
}

void Runtime::on_last_handle(Storage& s) {
  std::lock_guard lock(impl_->mu);
  impl_->free_if_unused(s);
  if (impl_->observer) impl_->observer->on_last_handle(s);
}

// Note [pin guard]. A consumer outside the runtime (a DLPack export, an
// embedding runtime) holds a raw pointer to a storage's bytes, so they must
// stay exactly where they are until it lets go: a pinned storage is never
// an eviction candidate, never freed eagerly and never moved (a host-swap
// tier must skip it too). Pins are counted, apart from the constant flag
// (which says there is no lineage) and from op locks (which the OOM report
// calls "in use"). An allocation that finds only pinned, locked and
// constant bytes under the budget raises OutOfMemoryError with its report;
// after the last unpin the storage is evictable again.
void Runtime::pin(Storage& s) {
  std::lock_guard lock(impl_->mu);
  impl_->throw_deferred_error();
  StorageState& st = Impl::st(s);
  if (!s.resident()) {
    DTR_CHECK(Impl::replayable_lineage(s) || Impl::swapped(s), ValueError,
              "pin: storage of {} bytes on {} has no bytes and no lineage to rebuild them",
              s.nbytes(), s.device().str());
    impl_->rematerialize(s);  // OutOfMemoryError: nothing is pinned
  }
  impl_->pool_remove(s);
  ++st.pin_count;
  if (impl_->observer) impl_->observer->on_pin(s);
}

void Runtime::unpin(Storage& s) {
  std::lock_guard lock(impl_->mu);
  StorageState& st = Impl::st(s);
  DTR_CHECK(st.pin_count > 0, ValueError, "unpin: storage of {} bytes on {} is not pinned",
            s.nbytes(), s.device().str());
  if (--st.pin_count == 0) {
    st.last_access = impl_->clock;
    impl_->pool_add(s);
    impl_->free_if_unused(s);
  }
  if (impl_->observer) impl_->observer->on_unpin(s);
}

PinGuard::PinGuard(std::shared_ptr<Storage> storage, Runtime& runtime)
    : storage_(std::move(storage)), runtime_(&runtime) {
  DTR_CHECK(storage_ != nullptr, ValueError, "PinGuard: the storage is null");
  runtime_->pin(*storage_);
}

PinGuard::~PinGuard() { reset(); }

PinGuard::PinGuard(PinGuard&& other) noexcept
    : storage_(std::move(other.storage_)), runtime_(other.runtime_) {}

PinGuard& PinGuard::operator=(PinGuard&& other) noexcept {
  if (this != &other) {
    reset();
    storage_ = std::move(other.storage_);
    runtime_ = other.runtime_;
  }
  return *this;
}

void PinGuard::reset() noexcept {
  if (storage_ == nullptr) return;
  runtime_->unpin(*storage_);  // balanced with the constructor's pin: does not throw
  storage_.reset();
}

void Runtime::set_heuristic(Heuristic h) {
  std::lock_guard lock(impl_->mu);
  impl_->heuristic = h;
  impl_->reseat_policy();
}

void Runtime::set_policy(std::unique_ptr<EvictionPolicy> policy) {
  DTR_CHECK(policy != nullptr, ValueError, "set_policy: the policy is null");
  std::lock_guard lock(impl_->mu);
  impl_->policy = std::move(policy);
  impl_->reseat_policy_state();
}

Heuristic Runtime::heuristic() const {
  std::lock_guard lock(impl_->mu);
  return impl_->heuristic;
}

void Runtime::set_sample_mode(SampleMode m) {
  std::lock_guard lock(impl_->mu);
  impl_->sample = m;
}

SampleMode Runtime::sample_mode() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sample;
}

int64_t Runtime::min_evict_bytes() const {
  std::lock_guard lock(impl_->mu);
  return impl_->min_evict_bytes;
}

void Runtime::set_min_evict_bytes(int64_t bytes) {
  DTR_CHECK(bytes >= 0, ValueError, "set_min_evict_bytes: expected >= 0 bytes, got {}", bytes);
  std::lock_guard lock(impl_->mu);
  impl_->min_evict_bytes = bytes;
}

void Runtime::set_thrash_limit(double limit) {
  DTR_CHECK(limit == 0 || (limit >= 1 && std::isfinite(limit)), ValueError,
            "set_thrash_limit: expected 0 (off) or a finite limit >= 1, got {}", limit);
  std::lock_guard lock(impl_->mu);
  impl_->thrash_limit = limit;
  for (const auto& d : impl_->devices) impl_->reset_thrash_window(*d);
}

double Runtime::thrash_limit() const {
  std::lock_guard lock(impl_->mu);
  return impl_->thrash_limit;
}

void Runtime::set_swap_mode(SwapMode m) {
  std::lock_guard lock(impl_->mu);
  impl_->swap_mode = m;
  for (const auto& d : impl_->devices) impl_->apply_swap_mode(*d);
}

SwapMode Runtime::swap_mode() const {
  std::lock_guard lock(impl_->mu);
  return impl_->swap_mode;
}

void Runtime::set_verify(bool on) {
  std::lock_guard lock(impl_->mu);
  impl_->verify = on;
}

void Runtime::set_trace_path(const std::string& path) {
  std::lock_guard lock(impl_->mu);
  impl_->trace_open_error.clear();
  impl_->open_trace(path);
}

void Runtime::flush_trace() {
  std::lock_guard lock(impl_->mu);
  if (impl_->trace) impl_->trace->flush();
}

namespace {
// "[2, 3] float32, [3] int64"
std::string metas_str(std::span<const TensorMeta> metas) {
  std::string out;
  for (const TensorMeta& m : metas) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", shape_str(m.shape), dtype_name(m.dtype));
  }
  return out;
}
}  // namespace

void Runtime::trace_op(std::string_view op, std::chrono::steady_clock::time_point start,
                       std::span<const TensorMeta> input_metas, std::span<Storage* const> inputs,
                       std::span<const TensorMeta> output_metas, std::span<Storage* const> outputs) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->trace) return;
  const auto end = std::chrono::steady_clock::now();
  if (start == std::chrono::steady_clock::time_point{}) start = end;  // tracing began mid-op
  std::vector<uint64_t> in_ids, out_ids;
  for (const Storage* s : inputs) in_ids.push_back(impl_->trace_id(*s));
  int64_t out_bytes = 0;
  for (const Storage* s : outputs) {
    out_ids.push_back(impl_->trace_id(*s));
    out_bytes += s->nbytes();
  }
  impl_->trace_event(fmt::format(
      R"({{"name":"{}","cat":"op","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":1,"tid":{},"args":{{"tick":{},"inputs":"{}","outputs":"{}","output_bytes":{},"input_storages":[{}],"output_storages":[{}]}}}})",
      op, trace_us(start), std::chrono::duration<double, std::micro>(end - start).count(),
      trace_thread_id(), impl_->clock, metas_str(input_metas), metas_str(output_metas), out_bytes,
      fmt::join(in_ids, ","), fmt::join(out_ids, ",")));
  for (Storage* s : outputs) {
    if (DeviceMemory* m = Impl::memory_of(*s)) {
      impl_->trace_counter(*m);
      break;
    }
  }
}

uint64_t Runtime::trace_scope_begin(std::string_view name) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->trace) return 0;
  impl_->trace_event(fmt::format(
      R"({{"name":"{}","cat":"scope","ph":"B","ts":{:.3f},"pid":1,"tid":{}}})", json_escape(name),
      trace_now_us(), trace_thread_id()));
  return impl_->trace_generation;
}

void Runtime::trace_scope_end(std::string_view name, uint64_t generation) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->trace || generation != impl_->trace_generation) return;
  impl_->trace_event(fmt::format(
      R"({{"name":"{}","cat":"scope","ph":"E","ts":{:.3f},"pid":1,"tid":{}}})", json_escape(name),
      trace_now_us(), trace_thread_id()));
}

int64_t Runtime::clock() const {
  std::lock_guard lock(impl_->mu);
  return impl_->clock;
}

Storage* Runtime::next_victim(Device device) {
  std::lock_guard lock(impl_->mu);
  DeviceMemory& m = impl_->memory(device);
  return impl_->choose_victim(m.pool, m.swap_on ? impl_->host_room() : std::numeric_limits<int64_t>::max()).s;
}

Stats Runtime::stats(Device device) const {
  std::lock_guard lock(impl_->mu);
  const DeviceMemory& m = impl_->memory(device);
  Stats s = m.stats;
  s.evictable_bytes = m.pool.bytes();
  if (const std::optional<AllocatorStats> a = m.alloc->memory_stats()) {
    s.allocated_bytes = a->allocated_bytes;
    s.reserved_bytes = a->reserved_bytes;
    s.largest_free_block = a->largest_free_block;
    s.peak_allocated_bytes = a->peak_allocated_bytes;
    s.fragmentation = dtr::fragmentation(*a);
  }
  s.metadata_nodes = live_node_count();
  s.live_storages = int64_t(m.tracked.size());
  return s;
}

Stats Runtime::stats() const { return stats(default_device()); }

void Runtime::reset_stats() {
  std::lock_guard lock(impl_->mu);
  for (const auto& m : impl_->devices) {
    const Stats old = m->stats;
    m->stats = Stats{};
    m->stats.budget_bytes = old.budget_bytes;
    m->stats.resident_bytes = old.resident_bytes;
    m->stats.peak_bytes = old.resident_bytes;
    m->stats.swapped_bytes = old.swapped_bytes;      // state, not counters
    m->stats.host_tier_bytes = old.host_tier_bytes;
    if (m->alloc != nullptr) m->alloc->reset_peak_stats();
  }
}

std::vector<Device> Runtime::devices() const {
  std::lock_guard lock(impl_->mu);
  std::vector<Device> out;
  for (const auto& m : impl_->devices) out.push_back(m->device);
  return out;
}

std::vector<Runtime::MemoryHolding> Runtime::memory_holdings() const {
  std::lock_guard lock(impl_->mu);
  std::vector<MemoryHolding> out;
  for (const auto& m : impl_->devices) out.push_back({m->device, m->alloc, {}});
  const auto holding = [&](Device d) -> MemoryHolding& {
    for (MemoryHolding& h : out)
      if (h.device == d) return h;
    return out.emplace_back(MemoryHolding{d, nullptr, {}});
  };
  for (const auto& m : impl_->devices) {
    for (Storage* s : m->tracked) {
      if (s->resident()) holding(m->device).live.emplace_back(s->data(), s->nbytes());
      if (const StorageState* st = find_state(*s); st != nullptr && st->host_data != nullptr)
        holding(Device(kCPU)).live.emplace_back(st->host_data, s->nbytes());
    }
  }
  for (MemoryHolding& h : out)
    std::sort(h.live.begin(), h.live.end(),
              [](const auto& a, const auto& b) { return std::less<const void*>()(a.first, b.first); });
  return out;
}


// ---- recording and simulation (Note [planner]) -----------------------------------

void Runtime::set_observer(RuntimeObserver* observer) {
  std::lock_guard lock(impl_->mu);
  impl_->observer = observer;
}

RuntimeObserver* Runtime::observer() const {
  std::lock_guard lock(impl_->mu);
  return impl_->observer;
}

void Runtime::set_simulated(bool on) {
  std::lock_guard lock(impl_->mu);
  impl_->simulated = on;
}

RuntimeSnapshot Runtime::snapshot(uint32_t generation, int slot) const {
  DTR_CHECK(slot == 0 || slot == 1, ValueError, "snapshot: slot must be 0 or 1, got {}", slot);
  std::lock_guard lock(impl_->mu);
  RuntimeSnapshot snap;
  snap.clock = impl_->clock;
  snap.sample_state = impl_->sample_state;
  absl::flat_hash_map<const Storage*, int32_t> index;
  absl::flat_hash_map<const Node*, int32_t> node_index;
  std::vector<const Storage*> order;
  auto add = [&](const Storage& s) -> int32_t {
    auto [it, fresh] = index.try_emplace(&s, int32_t(order.size()));
    if (fresh) order.push_back(&s);
    return it->second;
  };
  // Tracked storages: the eviction candidates in their pool's order (so a
  // restored pool is laid out alike, and ties between equal scores go the
  // same way), then the others in a stable order (by their producer's
  // tick, last access, size); then whatever their lineage reads.
  std::vector<const Storage*> tracked;
  for (const auto& m : impl_->devices)
    for (const Storage* s : m->tracked) tracked.push_back(s);
  std::sort(tracked.begin(), tracked.end(), [](const Storage* a, const Storage* b) {
    const int64_t ia = Impl::st(*a).pool_index, ib = Impl::st(*b).pool_index;
    if ((ia >= 0) != (ib >= 0)) return ia >= 0;
    if (ia != ib) return ia < ib;
    const Node* pa = producer(*a);
    const Node* pb = producer(*b);
    const int64_t ta = pa ? pa->tick : -1, tb = pb ? pb->tick : -1;
    if (ta != tb) return ta < tb;
    if (Impl::st(*a).last_access != Impl::st(*b).last_access)
      return Impl::st(*a).last_access < Impl::st(*b).last_access;
    return a->nbytes() < b->nbytes();
  });
  for (const Storage* s : tracked) add(*s);
  std::vector<const Node*> nodes;
  for (size_t i = 0; i < order.size(); ++i) {  // grows as lineage is walked
    const Node* p = producer(*order[i]);
    if (p == nullptr || !node_index.try_emplace(p, int32_t(nodes.size())).second) continue;
    nodes.push_back(p);
    for (const auto& in : p->inputs) add(*in);
  }
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->tick < b->tick; });
  for (size_t i = 0; i < nodes.size(); ++i) node_index[nodes[i]] = int32_t(i);
  for (const Storage* s : order) {
    const StorageState* st = find_state(*s);
    RuntimeSnapshot::StorageEntry e;
    e.nbytes = s->nbytes();
    e.device = s->device();
    e.resident = s->resident();
    e.swapped = Impl::swapped(*s);
    e.user_held = s->handle_count.load() > 0;
    if (st != nullptr) {
      e.accounted = st->memory != nullptr && st->memory->rt == impl_.get();
      e.constant = st->constant;
      e.borrowed = st->borrowed;
      e.pin_count = st->pin_count;
      e.last_access = st->last_access;
      if (st->producer) e.producer = node_index.at(st->producer.get());
    }
    snap.storages.push_back(e);
  }
  for (const Node* n : nodes) {
    RuntimeSnapshot::NodeEntry e;
    e.op_name = n->op_name;
    for (const auto& in : n->inputs) e.inputs.push_back(index.at(in.get()));
    for (const auto& w : n->outputs) {
      const std::shared_ptr<Storage> o = w.lock();
      auto it = o ? index.find(o.get()) : index.end();
      e.outputs.push_back(it != index.end() ? it->second : -1);
    }
    e.output_nbytes = n->output_nbytes;
    e.cost_seconds = n->cost_seconds;
    e.flops = n->flops;
    e.replayable = n->replayable;
    e.device = n->device;
    e.tick = n->tick;
    snap.nodes.push_back(std::move(e));
  }
  for (size_t i = 0; i < order.size(); ++i) {
    StorageState& st = state(*const_cast<Storage*>(order[i]));
    st.record_generation[slot] = generation;
    st.record_id[slot] = uint32_t(i + 1);
  }
  return snap;
}

std::vector<std::shared_ptr<Storage>> Runtime::restore(
    const RuntimeSnapshot& snap,
    const std::function<std::function<void(std::span<Storage* const>, std::span<Storage* const>)>(size_t)>&
        make_recompute) {
  std::lock_guard lock(impl_->mu);
  for (const auto& m : impl_->devices)
    DTR_CHECK(m->tracked.empty() && !m->budget, ValueError,
              "restore: the runtime must be fresh (no storage and no budget on {})", m->device.str());
  std::vector<std::shared_ptr<Storage>> out;
  out.reserve(snap.storages.size());
  for (const auto& e : snap.storages) {
    auto s = new_storage(e.nbytes, e.device);
    StorageState& st = Impl::st(*s);
    if (e.resident) {
      if (e.accounted) {
        impl_->allocate(*s);
      } else {
        DeviceMemory& m = impl_->memory(e.device);
        s->set_data(m.alloc->allocate(size_t(e.nbytes)), m.alloc);
      }
    } else if (e.swapped && e.accounted) {  // its bytes in this runtime's host tier
      DeviceMemory& m = impl_->memory(e.device);
      DeviceMemory& h = impl_->host_memory();
      st.memory = &m;
      m.tracked.insert(s.get());
      st.host_data = h.alloc->allocate(size_t(e.nbytes));
      Impl::track_bytes(h, *s);
      h.stats.host_tier_bytes += e.nbytes;
      m.stats.swapped_bytes += e.nbytes;
    }
    st.constant = e.constant;
    st.borrowed = e.borrowed;
    st.pin_count = e.pin_count;
    st.last_access = e.last_access;
    s->handle_count.store(e.user_held ? 1 : 0);
    out.push_back(std::move(s));
  }
  for (size_t i = 0; i < snap.nodes.size(); ++i) {
    const auto& e = snap.nodes[i];
    auto node = std::make_shared<Node>();
    node->op_name = e.op_name;
    for (int32_t in : e.inputs) node->inputs.push_back(out[size_t(in)]);
    for (int32_t o : e.outputs) node->outputs.push_back(o >= 0 ? std::weak_ptr<Storage>(out[size_t(o)]) : std::weak_ptr<Storage>());
    node->output_nbytes = e.output_nbytes;
    node->cost_seconds = e.cost_seconds;
    node->flops = e.flops;
    node->replayable = e.replayable;
    node->device = e.device;
    node->tick = e.tick;
    node->recompute = make_recompute(i);
    for (int32_t o : e.outputs)
      if (o >= 0 && snap.storages[size_t(o)].producer == int32_t(i)) Impl::st(*out[size_t(o)]).producer = node;
    for (const auto& in : node->inputs) Impl::st(*in).consumers.push_back(node);
  }
  for (const auto& s : out) impl_->pool_add(*s);
  impl_->clock = snap.clock;
  impl_->sample_state = snap.sample_state;
  return out;
}

}  // namespace dtr::remat
