// Note [planner]: record one step's runtime calls, then replay them through
// a fresh, simulated Runtime per budget. See remat/planner.h.
#include "remat/planner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/op_registry.h"
#include "remat/runtime.h"
#include "remat/storage_state.h"

namespace dtr::remat {

namespace {

using Clock = std::chrono::steady_clock;

enum class Ev : uint8_t {
  kAllocate,
  kAcquire,
  kRelease,
  kRecord,
  kRegisterConstant,
  kMarkBorrowed,
  kBeforeMutation,
  kLastHandle,
  kPin,
  kUnpin,
  kDestroy,
  kMeasureStart,  // record_steps: the counters restart here
};

// One runtime call. Lists of storages live in StepTrace::ids as
// id << 1 | user_held.
struct Event {
  Ev kind;
  bool flag = false;   // before_mutation: keep_old
  uint32_t id = 0;     // the storage of single-storage events
  uint32_t other = 0;  // before_mutation: the old version's id (0: none); record: node index
  uint32_t list = 0;   // acquire, release, record: first entry in ids
  uint32_t count = 0;
};

// A storage first seen during the step: how the simulation makes it.
struct Decl {
  int64_t nbytes = 0;
  Device device;
  // Fresh (no bytes yet: the op path allocates it next), or bytes the
  // runtime does not account (a from_blob buffer; a placeholder).
  bool fresh = true;
};

struct NodeRecord {
  std::string_view op_name;
  uint32_t inputs = 0, n_inputs = 0;    // ids[inputs, inputs + n_inputs): id << 1 | held
  uint32_t outputs = 0, n_outputs = 0;  // likewise; id 0: gone
  uint32_t nbytes = 0;                  // output_nbytes[nbytes, nbytes + n_outputs)
  double cost_seconds = 0;
  double flops = 0;
  double kernel_seconds = 0;
  bool replayable = true;
  Device device;
};

// Thrown from a simulated replay when the replay limit is reached; not a
// dtr::Error, so the runtime's error context passes it through unchanged.
struct ThrashStop {};

}  // namespace

class StepTrace {
 public:
  RuntimeSnapshot start;
  std::vector<Event> events;
  std::vector<uint32_t> ids;
  std::vector<int64_t> output_nbytes;
  std::vector<NodeRecord> nodes;
  std::vector<Decl> decls;  // by id; entries of the snapshot's storages unused
  Heuristic heuristic = Heuristic::kDtrEq;
  SampleMode sample = SampleMode::kAuto;
  SwapMode swap = SwapMode::kAuto;
  int64_t min_evict_bytes = 0;
  double step_seconds = 0;    // wall time of the recorded calls after kMeasureStart (all when none)
  int measured_steps = 1;     // calls of the step after kMeasureStart
  double kernel_seconds = 0;  // Σ nodes' kernel_seconds
};

namespace {

uint32_t pack(uint32_t id, bool held) { return id << 1 | uint32_t(held); }

// Note [planner]: the recorder. Every storage gets an id the first time an
// event names it (stamped on its StorageState, so a storage at a reused
// address is a new one); the snapshot's storages have ids 1..n.
class Recorder final : public RuntimeObserver {
 public:
  /// `next`: a recording already in progress (DTR_PLAN's), told of every
  /// call too.
  Recorder(StepTrace& t, uint32_t generation, int slot, RuntimeObserver* next = nullptr)
      : t_(t), generation_(generation), slot_(slot), next_(next) {
    t_.decls.resize(t_.start.storages.size() + 1);
    mark_ = Clock::now();
  }

  void on_allocate(Storage& s) override {
    if (next_) next_->on_allocate(s);
    push(Ev::kAllocate, id(s, /*fresh=*/true));
    mark_ = Clock::now();
  }
  void on_acquire(std::span<Storage* const> ss) override {
    if (next_) next_->on_acquire(ss);
    push_list(Ev::kAcquire, ss);
    mark_ = Clock::now();
  }
  void on_release(std::span<Storage* const> ss) override {
    if (next_) next_->on_release(ss);
    push_list(Ev::kRelease, ss);
  }
  void on_record(const Node& n) override {
    if (next_) next_->on_record(n);
    const double kernel = std::chrono::duration<double>(Clock::now() - mark_).count();
    NodeRecord r;
    r.op_name = n.op_name;
    r.inputs = uint32_t(t_.ids.size());
    r.n_inputs = uint32_t(n.inputs.size());
    for (const auto& in : n.inputs) t_.ids.push_back(pack(id(*in, false), in->handle_count.load() > 0));
    r.outputs = uint32_t(t_.ids.size());
    r.n_outputs = uint32_t(n.outputs.size());
    for (const auto& w : n.outputs) {
      const std::shared_ptr<Storage> o = w.lock();
      t_.ids.push_back(o ? pack(id(*o, false), o->handle_count.load() > 0) : 0);
    }
    r.nbytes = uint32_t(t_.output_nbytes.size());
    for (size_t i = 0; i < n.outputs.size(); ++i)
      t_.output_nbytes.push_back(i < n.output_nbytes.size() ? n.output_nbytes[i] : 0);
    r.cost_seconds = n.cost_seconds;
    r.flops = n.flops;
    r.kernel_seconds = kernel;
    r.replayable = n.replayable;
    r.device = n.device;
    t_.kernel_seconds += kernel;
    Event e{Ev::kRecord};
    e.other = uint32_t(t_.nodes.size());
    t_.nodes.push_back(r);
    t_.events.push_back(e);
  }
  void on_register_constant(Storage& s) override {
    if (next_) next_->on_register_constant(s);
    push(Ev::kRegisterConstant, id(s, false));
  }
  void on_mark_borrowed(Storage& s) override {
    if (next_) next_->on_mark_borrowed(s);
    push(Ev::kMarkBorrowed, id(s, false));
  }
  void on_before_mutation(Storage& s, bool keep_old, Storage* old) override {
    if (next_) next_->on_before_mutation(s, keep_old, old);
    Event e{Ev::kBeforeMutation};
    e.id = id(s, false);
    e.flag = keep_old;
    // The old version's declaration is a placeholder: the simulation maps
    // the id to what its own before_mutation returns.
    if (old != nullptr) e.other = id(*old, false);
    t_.events.push_back(e);
    mark_ = Clock::now();
  }
  void on_last_handle(Storage& s) override {
    if (next_) next_->on_last_handle(s);
    // Storages no event has named yet (a tensor made and dropped without
    // reaching the runtime) do not matter to the simulation.
    if (known(s)) push(Ev::kLastHandle, id(s, false));
  }
  void on_pin(Storage& s) override {
    if (next_) next_->on_pin(s);
    push(Ev::kPin, id(s, false));
  }
  void on_unpin(Storage& s) override {
    if (next_) next_->on_unpin(s);
    push(Ev::kUnpin, id(s, false));
  }
  void mark_measure_start() { t_.events.push_back(Event{Ev::kMeasureStart}); }
  void on_destroy(Storage& s) override {
    if (next_) next_->on_destroy(s);
    if (known(s)) push(Ev::kDestroy, id(s, false));
  }

 private:
  bool known(const Storage& s) const {
    const StorageState* st = find_state(s);
    return st != nullptr && st->record_generation[slot_] == generation_;
  }
  uint32_t id(Storage& s, bool fresh) {
    StorageState& st = state(s);
    if (st.record_generation[slot_] != generation_) {
      st.record_generation[slot_] = generation_;
      st.record_id[slot_] = uint32_t(t_.decls.size());
      Decl d;
      d.nbytes = s.nbytes();
      d.device = s.device();
      d.fresh = fresh;
      t_.decls.push_back(d);
    }
    return st.record_id[slot_];
  }
  void push(Ev kind, uint32_t id) {
    Event e{kind};
    e.id = id;
    t_.events.push_back(e);
  }
  void push_list(Ev kind, std::span<Storage* const> ss) {
    Event e{kind};
    e.list = uint32_t(t_.ids.size());
    e.count = uint32_t(ss.size());
    for (Storage* s : ss) t_.ids.push_back(pack(id(*s, false), s->handle_count.load() > 0));
    t_.events.push_back(e);
  }

  StepTrace& t_;
  uint32_t generation_;
  int slot_;  // StorageState::record_id's slot
  RuntimeObserver* next_;
  Clock::time_point mark_;
};

// Addresses that are never dereferenced: a simulated storage's bytes are
// not real (Runtime::set_simulated).
class SimAllocator final : public Allocator, public AllocatorProvider {
 public:
  void* allocate(size_t /*nbytes*/) override {
    next_ += 64;
    return reinterpret_cast<void*>(next_);
  }
  void deallocate(void*, size_t) override {}
  Allocator* allocator(Device) override { return this; }

 private:
  uintptr_t next_ = 0x1000;
};

double elapsed(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// One simulated run of a trace.
class Simulation {
 public:
  Simulation(const StepTrace& t, Heuristic h, double max_replay_factor)
      : t_(t), rt_(alloc_, make_policy(h)) {
    rt_.set_simulated(true);
    rt_.set_heuristic(h);
    rt_.set_sample_mode(t.sample);
    rt_.set_swap_mode(t.swap);
    rt_.set_min_evict_bytes(t.min_evict_bytes);
    limit_ = int64_t(std::ceil(max_replay_factor * double(std::max<size_t>(1, t.nodes.size()))));
    std::vector<std::shared_ptr<Storage>> start = rt_.restore(t.start, [this](size_t i) {
      // Nodes from before the step: no kernel time was measured; their cost
      // model's seconds stand in.
      return replay_fn(t_.start.nodes[i].cost_seconds);
    });
    table_.resize(t.decls.size());
    for (size_t i = 0; i < start.size(); ++i) table_[i + 1] = std::move(start[i]);
  }

  Runtime& runtime() { return rt_; }
  const std::vector<std::shared_ptr<Storage>>& table() const { return table_; }
  double replay_seconds() const { return replay_seconds_; }

  /// Applies event i. Throws what the runtime throws, and ThrashStop.
  void apply(size_t i) {
    const Event& e = t_.events[i];
    switch (e.kind) {
      case Ev::kAllocate: {
        std::shared_ptr<Storage>& s = table_[e.id];
        if (s == nullptr) s = new_storage(t_.decls[e.id].nbytes, t_.decls[e.id].device);
        rt_.allocate(*s);
        break;
      }
      case Ev::kAcquire:
      case Ev::kRelease: {
        ptrs_.clear();
        for (uint32_t k = 0; k < e.count; ++k) ptrs_.push_back(held(t_.ids[e.list + k]).get());
        if (e.kind == Ev::kAcquire) {
          rt_.acquire(ptrs_);
        } else {
          rt_.release(ptrs_);
        }
        break;
      }
      case Ev::kRecord: {
        const NodeRecord& r = t_.nodes[e.other];
        auto node = std::make_shared<Node>();
        node->op_name = r.op_name;
        for (uint32_t k = 0; k < r.n_inputs; ++k) node->inputs.push_back(held(t_.ids[r.inputs + k]));
        for (uint32_t k = 0; k < r.n_outputs; ++k) {
          const uint32_t packed = t_.ids[r.outputs + k];
          node->outputs.push_back(packed == 0 ? std::weak_ptr<Storage>() : std::weak_ptr<Storage>(held(packed)));
          node->output_nbytes.push_back(t_.output_nbytes[r.nbytes + k]);
        }
        node->cost_seconds = r.cost_seconds;
        node->flops = r.flops;
        node->replayable = r.replayable;
        node->device = r.device;
        node->recompute = replay_fn(r.kernel_seconds);
        rt_.record(node);
        break;
      }
      case Ev::kRegisterConstant:
        rt_.register_constant(*get(e.id));
        break;
      case Ev::kMarkBorrowed:
        rt_.mark_borrowed(*get(e.id));
        break;
      case Ev::kBeforeMutation: {
        std::shared_ptr<Storage> old = rt_.before_mutation(get(e.id), e.flag);
        // Where this budget's run needs no old version but the recorded
        // one did, later events naming it get a placeholder.
        if (e.other != 0) table_[e.other] = old;
        break;
      }
      case Ev::kLastHandle: {
        const std::shared_ptr<Storage>& s = get(e.id);
        s->handle_count.store(0);
        rt_.on_last_handle(*s);
        break;
      }
      case Ev::kPin:
        rt_.pin(*get(e.id));
        break;
      case Ev::kUnpin:
        rt_.unpin(*get(e.id));
        break;
      case Ev::kDestroy:
        table_[e.id].reset();
        break;
      case Ev::kMeasureStart:
        rt_.reset_stats();
        replay_seconds_ = 0;
        break;
    }
  }

 private:
  std::function<void(std::span<Storage* const>, std::span<Storage* const>)> replay_fn(double seconds) {
    return [this, seconds](std::span<Storage* const>, std::span<Storage* const>) {
      if (++replays_ > limit_) throw ThrashStop{};
      replay_seconds_ += seconds;
    };
  }
  // The storage of `id`; one the simulation does not have (an old version
  // its own run did not need) is a placeholder whose bytes no budget counts.
  const std::shared_ptr<Storage>& get(uint32_t id) {
    std::shared_ptr<Storage>& s = table_[id];
    if (s == nullptr) {
      const Decl& d = t_.decls[id];
      s = new_storage(d.nbytes, d.device);
      s->set_data(alloc_.allocate(size_t(d.nbytes)), &alloc_);
    }
    return s;
  }
  const std::shared_ptr<Storage>& held(uint32_t packed) {
    const std::shared_ptr<Storage>& s = get(packed >> 1);
    s->handle_count.store((packed & 1) != 0 ? 1 : 0);
    return s;
  }

  const StepTrace& t_;
  // Destroyed in reverse: the storages first, then the runtime that
  // accounts for them, then the allocator.
  SimAllocator alloc_;
  Runtime rt_;
  std::vector<std::shared_ptr<Storage>> table_;  // by id: what the recorded run still holds
  std::vector<Storage*> ptrs_;
  int64_t replays_ = 0;
  int64_t limit_ = 0;
  double replay_seconds_ = 0;
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Bytes of resident storages the budget of `device` counts: (locked or
// pinned, never-evictable) of the live storages of `sim`.
struct FloorScan {
  int64_t locked = 0, constants = 0;
  std::vector<std::pair<int64_t, std::string>> members;
};
FloorScan scan_floor(const Simulation& sim, Device device, std::string_view op) {
  FloorScan f;
  absl::flat_hash_set<const Storage*> seen;
  for (const auto& s : sim.table()) {
    if (s == nullptr || !s->resident() || s->device() != device || !seen.insert(s.get()).second) continue;
    const StorageState* st = find_state(*s);
    if (st == nullptr || st->memory == nullptr) continue;
    const bool in_use = st->lock_count > 0 || st->pin_count > 0;
    const bool fixed = st->constant || st->producer == nullptr || !st->producer->replayable;
    if (in_use) {
      f.locked += s->nbytes();
    } else if (fixed) {
      f.constants += s->nbytes();
    } else {
      continue;
    }
    {
      std::string what;
      if (in_use) {
        what = fmt::format("in use by '{}'", op);
      } else if (st->producer != nullptr) {
        what = fmt::format("constant from '{}'", st->producer->op_name);
      } else {
        what = "constant (parameter, input or optimizer state)";
      }
      f.members.emplace_back(s->nbytes(), std::move(what));
    }
  }
  return f;
}

void check_budget_list(const PlanOptions& o) {
  DTR_CHECK(!o.fractions.empty() || !o.budget_bytes.empty(), ValueError,
            "plan: no budget to simulate (PlanOptions::fractions and budget_bytes are both empty)");
  for (double f : o.fractions)
    DTR_CHECK(f > 0 && std::isfinite(f), ValueError, "plan: budget fractions must be positive and finite, got {}", f);
  for (int64_t b : o.budget_bytes)
    DTR_CHECK(b > 0, ValueError, "plan: budgets must be positive, got {} bytes", b);
  DTR_CHECK(o.warmup_steps >= 0, ValueError, "plan: warmup_steps must be >= 0, got {}", o.warmup_steps);
  DTR_CHECK(o.bisect_tolerance > 0 && o.bisect_tolerance < 1, ValueError,
            "plan: bisect_tolerance must be in (0, 1), got {}", o.bisect_tolerance);
  DTR_CHECK(o.max_replay_factor > 0, ValueError, "plan: max_replay_factor must be positive, got {}",
            o.max_replay_factor);
  if (o.timeline_fraction)
    DTR_CHECK(*o.timeline_fraction > 0, ValueError, "plan: timeline_fraction must be positive, got {}",
              *o.timeline_fraction);
}

// No budget on any device while a step is recorded; the budgets come back
// (with their evictions) when it ends, however it ends.
class BudgetsLifted {
 public:
  BudgetsLifted() {
    Runtime& rt = Runtime::global();
    for (Device d : rt.devices()) {
      saved_.emplace_back(d, rt.memory_budget(d));
      rt.set_memory_budget(d, std::nullopt);
    }
  }
  ~BudgetsLifted() {
    Runtime& rt = Runtime::global();
    for (const auto& [d, b] : saved_) {
      try {
        rt.set_memory_budget(d, b);
      } catch (...) {  // cannot fail for a budget that was valid before; never throw from here
      }
    }
  }
  BudgetsLifted(const BudgetsLifted&) = delete;
  BudgetsLifted& operator=(const BudgetsLifted&) = delete;

 private:
  std::vector<std::pair<Device, std::optional<int64_t>>> saved_;
};

// Recording generations of plan() (StorageState::record_generation[0]);
// DTR_PLAN's whole-run recording has slot 1 to itself.
constexpr uint32_t kProgramGeneration = 1;
std::atomic<uint32_t> g_generations{0};

std::shared_ptr<StepTrace> record_unbudgeted(const std::function<void()>& step, int unmeasured = 0,
                                             int measured = 1) {
  const uint32_t generation = ++g_generations;
  Runtime& rt = Runtime::global();
  auto t = std::make_shared<StepTrace>();
  t->heuristic = rt.heuristic();
  t->sample = rt.sample_mode();
  t->swap = rt.swap_mode();
  t->min_evict_bytes = rt.min_evict_bytes();
  t->start = rt.snapshot(generation);
  RuntimeObserver* const outer = rt.observer();
  Recorder recorder(*t, generation, /*slot=*/0, outer);
  struct Detach {
    Runtime& rt;
    RuntimeObserver* outer;
    ~Detach() { rt.set_observer(outer); }
  } detach{rt, outer};
  rt.set_observer(&recorder);
  for (int i = 0; i < unmeasured; ++i) step();
  if (unmeasured > 0) recorder.mark_measure_start();
  const auto t0 = Clock::now();
  for (int i = 0; i < measured; ++i) step();
  t->step_seconds = elapsed(t0);
  t->measured_steps = measured;
  return t;
}

}  // namespace

PlanPoint simulate(const StepTrace& trace, Device device, std::optional<int64_t> budget_bytes, Heuristic h,
                   double max_replay_factor, PlanTimeline* timeline) {
  DTR_CHECK(!budget_bytes || *budget_bytes > 0, ValueError, "simulate: the budget must be positive, got {} bytes",
            budget_bytes.value_or(0));
  DTR_CHECK(max_replay_factor > 0, ValueError, "simulate: max_replay_factor must be positive, got {}",
            max_replay_factor);
  const auto t0 = Clock::now();
  PlanPoint p;
  p.heuristic = h;
  p.budget_bytes = budget_bytes.value_or(-1);
  if (timeline != nullptr) *timeline = PlanTimeline{budget_bytes.value_or(-1), {}, {}, {}, {}};
  Simulation sim(trace, h, max_replay_factor);
  Runtime& rt = sim.runtime();
  rt.reset_stats();
  int64_t clock0 = rt.clock();
  Stats last = rt.stats(device);
  try {
    rt.set_memory_budget(device, budget_bytes);
    bool measuring = true;
    for (const Event& e : trace.events) measuring &= e.kind != Ev::kMeasureStart;
    for (size_t i = 0; i < trace.events.size(); ++i) {
      sim.apply(i);
      if (trace.events[i].kind == Ev::kMeasureStart) {
        measuring = true;
        last = rt.stats(device);
        clock0 = rt.clock();
      }
      if (timeline != nullptr && measuring && trace.events[i].kind == Ev::kRecord) {
        const Stats now = rt.stats(device);
        timeline->tick.push_back(rt.clock() - clock0);
        timeline->resident_bytes.push_back(now.resident_bytes);
        timeline->evictions.push_back(int32_t(now.evictions - last.evictions));
        timeline->replays.push_back(int32_t(now.recomputed_ops - last.recomputed_ops));
        last = now;
      }
    }
  } catch (const OutOfMemoryError& e) {
    p.outcome = PlanOutcome::kOutOfMemory;
    p.error = first_line(e.what());
  } catch (const ThrashStop&) {
    p.outcome = PlanOutcome::kThrash;
    p.error = fmt::format("stopped after {} replays ({} per recorded op): thrashing",
                          int64_t(std::ceil(max_replay_factor * double(std::max<size_t>(1, trace.nodes.size())))),
                          max_replay_factor);
  }
  const Stats s = rt.stats(device);
  p.peak_bytes = s.peak_bytes;
  p.evictions = s.evictions;
  p.rematerializations = s.rematerializations;
  p.recomputed_ops = s.recomputed_ops;
  p.recomputed_flops = s.recomputed_flops;
  p.recompute_seconds_estimated = s.recompute_seconds_estimated;
  p.recompute_seconds = sim.replay_seconds();
  p.swap_outs = s.swap_outs;
  p.swap_ins = s.swap_ins;
  p.swap_bytes = s.swap_bytes_out + s.swap_bytes_in;
  p.swap_seconds_estimated = s.swap_seconds_estimated;
  const double base = trace.step_seconds > 0 ? trace.step_seconds : 1e-9;
  p.predicted_slowdown = (base + p.recompute_seconds + p.swap_seconds_estimated) / base;
  p.simulate_seconds = elapsed(t0);
  return p;
}

std::shared_ptr<const StepTrace> record_step(const std::function<void()>& step) {
  DTR_CHECK(step != nullptr, ValueError, "record_step: the step function is empty");
  BudgetsLifted lifted;
  return record_unbudgeted(step);
}

std::shared_ptr<const StepTrace> record_steps(const std::function<void()>& step, int unmeasured, int measured) {
  DTR_CHECK(step != nullptr, ValueError, "record_steps: the step function is empty");
  DTR_CHECK(unmeasured >= 0 && measured >= 1, ValueError,
            "record_steps: expected unmeasured >= 0 and measured >= 1 steps, got {} and {}", unmeasured, measured);
  BudgetsLifted lifted;
  return record_unbudgeted(step, unmeasured, measured);
}

int measured_steps(const StepTrace& trace) { return trace.measured_steps; }

namespace {

// The unbudgeted simulation that fills the report's recording figures:
// peak, timeline, floor and what is resident at the peak.
void analyse(const StepTrace& t, Device device, PlanReport& r) {
  {
    Simulation sim(t, t.heuristic, 1e9);
    Runtime& rt = sim.runtime();
    rt.reset_stats();
    r.start_resident_bytes = rt.stats(device).resident_bytes;
    const int64_t clock0 = rt.clock();
    int64_t peak = -1;
    size_t peak_event = 0;
    for (size_t i = 0; i < t.events.size(); ++i) {
      sim.apply(i);
      const int64_t resident = rt.stats(device).resident_bytes;
      if (resident > peak) {
        peak = resident;
        peak_event = i;
      }
      if (t.events[i].kind != Ev::kRecord) continue;
      const NodeRecord& n = t.nodes[t.events[i].other];
      if (n.device == device) ++r.ops;
      r.unbudgeted.tick.push_back(rt.clock() - clock0);
      r.unbudgeted.resident_bytes.push_back(resident);
      r.unbudgeted.evictions.push_back(0);
      r.unbudgeted.replays.push_back(0);
      // Every resident storage is a candidate, or locked, pinned or a
      // constant: the floor at this op is what the candidates leave.
      const Stats st = rt.stats(device);
      if (st.resident_bytes - st.evictable_bytes > r.floor_bytes) {
        r.floor_bytes = st.resident_bytes - st.evictable_bytes;
        r.floor_op = std::string(n.op_name);
      }
    }
    r.peak_bytes = std::max<int64_t>(rt.stats(device).peak_bytes, 0);
    r.unbudgeted.budget_bytes = -1;
    // Second pass: the state at the peak and at the floor's op.
    Simulation again(t, t.heuristic, 1e9);
    bool floor_done = r.floor_op.empty(), peak_done = false;
    for (size_t i = 0; i < t.events.size() && !(floor_done && peak_done); ++i) {
      again.apply(i);
      if (!peak_done && i == peak_event) {
        peak_done = true;
        std::map<std::string, PeakShare> by_op;
        absl::flat_hash_set<const Storage*> seen;
        for (const auto& s : again.table()) {
          if (s == nullptr || !s->resident() || s->device() != device || !seen.insert(s.get()).second) continue;
          const StorageState* st = find_state(*s);
          if (st == nullptr || st->memory == nullptr) continue;
          const std::string op = st->producer ? std::string(st->producer->op_name) : std::string("constant");
          PeakShare& share = by_op[op];
          share.op = op;
          share.bytes += s->nbytes();
          ++share.storages;
        }
        for (auto& [_, share] : by_op) r.peak_by_op.push_back(share);
        std::sort(r.peak_by_op.begin(), r.peak_by_op.end(),
                  [](const PeakShare& a, const PeakShare& b) { return a.bytes > b.bytes; });
      }
      if (!floor_done && t.events[i].kind == Ev::kRecord) {
        const Stats st = again.runtime().stats(device);
        if (st.resident_bytes - st.evictable_bytes == r.floor_bytes) {
          floor_done = true;
          FloorScan members = scan_floor(again, device, t.nodes[t.events[i].other].op_name);
          r.floor_locked_bytes = members.locked;
          r.floor_constant_bytes = members.constants;
          std::sort(members.members.begin(), members.members.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
          for (size_t k = 0; k < std::min<size_t>(8, members.members.size()); ++k)
            r.floor_members.push_back(FloorMember{members.members[k].first, members.members[k].second});
        }
      }
    }
  }
}

}  // namespace

PlanReport plan_trace(const StepTrace& trace, const PlanOptions& options) {
  check_budget_list(options);
  const auto t0 = Clock::now();
  PlanReport r;
  r.device = options.device.value_or(default_device());
  r.events = int64_t(trace.events.size());
  r.step_seconds = trace.step_seconds;
  r.kernel_seconds = trace.kernel_seconds;
  analyse(trace, r.device, r);
  DTR_CHECK(r.ops > 0, ValueError, "plan: the step ran no op on {} (nothing to plan)", r.device.str());
  const std::vector<Heuristic> heuristics =
      options.heuristics.empty() ? std::vector<Heuristic>{trace.heuristic} : options.heuristics;
  const double peak = double(r.peak_bytes);
  auto point = [&](Heuristic h, int64_t budget, PlanTimeline* tl = nullptr) {
    PlanPoint p = simulate(trace, r.device, std::max<int64_t>(1, budget), h, options.max_replay_factor, tl);
    p.fraction = peak > 0 ? double(p.budget_bytes) / peak : 0;
    return p;
  };
  for (Heuristic h : heuristics) {
    for (double f : options.fractions) r.points.push_back(point(h, int64_t(std::llround(f * peak))));
    for (int64_t b : options.budget_bytes) r.points.push_back(point(h, b));
  }
  if (options.bisect) {
    const auto tol = std::max<int64_t>(1, int64_t(std::llround(options.bisect_tolerance * peak)));
    for (Heuristic h : heuristics) {
      // hi: the smallest feasible budget seen (the peak itself when none);
      // lo: the largest infeasible budget below it (the floor less one byte
      // at most: nothing below the floor can run).
      int64_t hi = r.peak_bytes, lo = std::max<int64_t>(0, r.floor_bytes - 1);
      PlanPoint best;
      bool have = false;
      for (const PlanPoint& p : r.points) {
        if (p.heuristic != h) continue;
        if (p.feasible() && p.budget_bytes <= hi) {
          hi = p.budget_bytes;
          best = p;
          have = true;
        }
      }
      for (const PlanPoint& p : r.points)
        if (p.heuristic == h && !p.feasible() && p.budget_bytes < hi) lo = std::max(lo, p.budget_bytes);
      if (!have) {
        best = point(h, hi);
        have = best.feasible();
        if (!have) {
          r.smallest_feasible.push_back(best);
          continue;
        }
      }
      while (hi - lo > tol) {
        const int64_t mid = lo + (hi - lo) / 2;
        PlanPoint p = point(h, mid);
        if (p.feasible()) {
          hi = mid;
          best = std::move(p);
        } else {
          lo = mid;
        }
      }
      r.smallest_feasible.push_back(best);
    }
  }
  double tf = 0.5;
  if (options.timeline_fraction) {
    tf = *options.timeline_fraction;
  } else if (!r.smallest_feasible.empty() && r.smallest_feasible[0].feasible() && peak > 0) {
    tf = double(r.smallest_feasible[0].budget_bytes) / peak;
  }
  point(heuristics[0], int64_t(std::llround(tf * peak)), &r.budgeted);
  r.simulate_seconds = elapsed(t0);
  return r;
}

PlanReport plan(const std::function<void()>& step, const PlanOptions& options) {
  DTR_CHECK(step != nullptr, ValueError, "plan: the step function is empty");
  check_budget_list(options);
  std::shared_ptr<StepTrace> trace;
  double warm_seconds = 0;
  {
    BudgetsLifted lifted;
    for (int i = 0; i < options.warmup_steps; ++i) {
      const auto t0 = Clock::now();
      step();
      warm_seconds = elapsed(t0);
    }
    trace = record_unbudgeted(step);
  }
  if (options.warmup_steps > 0) trace->step_seconds = warm_seconds;
  return plan_trace(*trace, options);
}

PlanReport plan(const std::function<void()>& step, const std::vector<double>& fractions) {
  PlanOptions o;
  o.fractions = fractions;
  return plan(step, o);
}

}  // namespace dtr::remat

namespace dtr::remat {

namespace {

// DTR_PLAN: the whole run, recorded from the runtime's start to exit.
struct ProgramPlan {
  Runtime* rt = nullptr;
  std::string base;  // path without a .txt or .svg ending
  StepTrace trace;
  std::unique_ptr<Recorder> recorder;
  Clock::time_point start;
};
ProgramPlan* g_program_plan = nullptr;  // never destroyed: storages may outlive static destruction

void write_text(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  DTR_CHECK(f != nullptr, ValueError, "DTR_PLAN: cannot open '{}' for writing", path);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  DTR_CHECK(std::fclose(f) == 0 && ok, ValueError, "DTR_PLAN: cannot write '{}'", path);
}

void finish_program_plan() {
  ProgramPlan& p = *g_program_plan;
  p.rt->set_observer(nullptr);
  p.trace.step_seconds = elapsed(p.start);
  try {
    PlanOptions o;
    const Device d = default_device();
    const MemoryBudget b = global_options().memory_budget.for_device(d, true);
    if (const auto bytes = b.resolve(backend(d).memory_bytes(d.index))) o.budget_bytes.push_back(*bytes);
    const PlanReport r = plan_trace(p.trace, o);
    const std::string table = format_plan(r);
    std::fputs(table.c_str(), stderr);
    write_text(p.base + ".txt", table);
    write_plan_svg(r, p.base + ".svg");
    std::fprintf(stderr, "DTR_PLAN: wrote %s.txt and %s.svg\n", p.base.c_str(), p.base.c_str());
  } catch (const std::exception& e) {
    logger().error("DTR_PLAN: no plan written: {}", e.what());
  }
}

}  // namespace

void start_program_plan(Runtime& rt, const std::string& path) {
  if (g_program_plan != nullptr) return;
  auto p = std::make_unique<ProgramPlan>();
  p->rt = &rt;
  p->base = path;
  // "dir/" names a folder: the files go in it as dtr_plan.txt and .svg.
  if (!p->base.empty() && p->base.back() == '/') p->base += "dtr_plan";
  for (const char* ext : {".txt", ".svg"}) {
    if (p->base.size() > 4 && p->base.compare(p->base.size() - 4, 4, ext) == 0) p->base.resize(p->base.size() - 4);
  }
  p->trace.heuristic = rt.heuristic();
  p->trace.sample = rt.sample_mode();
  p->trace.swap = rt.swap_mode();
  p->trace.min_evict_bytes = rt.min_evict_bytes();
  p->trace.start = rt.snapshot(kProgramGeneration, /*slot=*/1);
  p->recorder = std::make_unique<Recorder>(p->trace, kProgramGeneration, /*slot=*/1);
  if (global_options().memory_budget != MemoryBudgetSpec{})
    logger().warn("DTR_PLAN records this run with no memory budget: DTR_MEMORY_BUDGET is planned, not applied");
  // What the handler reads at exit is built before it is registered, so
  // it is destroyed after the handler runs (the op registry holds the op
  // names the trace points to).
  (void)OpRegistry::instance();
  (void)backend(default_device());
  (void)logger();
  p->start = Clock::now();
  rt.set_observer(p->recorder.get());
  g_program_plan = p.release();
  std::atexit(finish_program_plan);
}

}  // namespace dtr::remat
