// The budget planner (Note [planner]): records one unbudgeted training step
// (every call the op path makes into the runtime, with each op's sizes,
// costs and measured kernel time), then replays that trace through a
// fresh Runtime for each budget, driven by a simulated allocator and the
// runtime's own logical clock, without running a kernel. The eviction
// decisions are the runtime's own code (make_room, choose_victim,
// rematerialize, the policies), so where the policy is deterministic the
// predicted evictions, replays and recomputed FLOPs are those of a real run
// at that budget.
//
//   auto report = dtr::remat::plan([&] { train_step(); });
//   std::fputs(dtr::remat::format_plan(report).c_str(), stderr);
//   dtr::remat::write_plan_svg(report, "plan.svg");
//
// DTR_PLAN=path does the same for a whole program: the run is recorded with
// no budget, and at exit the table goes to stderr and to path.txt, the SVG
// to path.svg.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/options.h"

namespace dtr::remat {

class StepTrace;  // remat/planner.cpp: one recorded step
class Runtime;    // remat/runtime.h

/// How one simulated budget ended.
enum class PlanOutcome {
  kFeasible,     // the step ran to its end under the budget
  kOutOfMemory,  // the runtime raised OutOfMemoryError (the budget is below what some op needs)
  kThrash,       // replays exceeded PlanOptions::max_replay_factor × the step's ops: stopped
};
std::string_view plan_outcome_name(PlanOutcome o);

/// The prediction for one budget and heuristic.
struct PlanPoint {
  Heuristic heuristic = Heuristic::kDtrEq;
  double fraction = 0;       // budget_bytes / PlanReport::peak_bytes
  int64_t budget_bytes = 0;
  PlanOutcome outcome = PlanOutcome::kFeasible;
  std::string error;         // first line of the OutOfMemoryError, or why the run stopped
  int64_t peak_bytes = 0;    // predicted high-water mark of resident bytes on the device
  int64_t evictions = 0;
  int64_t rematerializations = 0;   // storages recomputed
  int64_t recomputed_ops = 0;       // op replays
  double recomputed_flops = 0;      // Σ replayed ops' estimated FLOPs
  double recompute_seconds_estimated = 0;  // Σ replayed ops' cost_seconds (the cost model's)
  /// Σ replayed ops' kernel seconds as measured in the recorded step.
  double recompute_seconds = 0;
  /// The host tier (Note [host tier]), where the device has one and
  /// DTR_SWAP was auto when the step was recorded: storages copied to host
  /// memory and back, bytes copied both ways, and the copies' seconds by
  /// the device's host link.
  int64_t swap_outs = 0;
  int64_t swap_ins = 0;
  int64_t swap_bytes = 0;
  double swap_seconds_estimated = 0;
  /// (step_seconds + recompute_seconds + swap_seconds_estimated) / step_seconds.
  double predicted_slowdown = 1;
  double simulate_seconds = 0;      // wall time this simulation took
  bool feasible() const { return outcome == PlanOutcome::kFeasible; }
};

/// One simulated run's resident bytes over the step: one sample per op
/// (after the op), with the evictions and replays that op caused.
struct PlanTimeline {
  int64_t budget_bytes = -1;  // -1: unbudgeted
  std::vector<int64_t> tick;  // logical clock, from 1 at the start of the step
  std::vector<int64_t> resident_bytes;
  std::vector<int32_t> evictions;
  std::vector<int32_t> replays;
};

/// A never-evictable storage at the floor's tick.
struct FloorMember {
  int64_t bytes = 0;
  std::string what;  // "constant (parameter, input or optimizer state)", "constant from 'add_'",
                     // "in use by 'matmul'"
};

/// Bytes resident at the unbudgeted peak, by the op that produced them.
struct PeakShare {
  std::string op;  // producing op, or "constant" for storages with no lineage
  int64_t bytes = 0;
  int64_t storages = 0;
};

/// What plan() found. Bytes are of PlanOptions::device; seconds are wall time.
struct PlanReport {
  Device device;
  int64_t ops = 0;              // ops recorded (lineage nodes)
  int64_t events = 0;           // runtime calls recorded
  int64_t peak_bytes = 0;       // the recorded step's peak, unbudgeted
  int64_t start_resident_bytes = 0;  // resident when the step began
  double step_seconds = 0;      // wall time of one unrecorded step (the last warm-up; else the recorded one)
  double kernel_seconds = 0;    // Σ the recorded ops' kernel times
  /// The never-evictable floor: the largest, over the step's ops, of the
  /// constants' bytes plus the bytes that op holds locked (its inputs and
  /// outputs). No budget below it can run the step, whatever the heuristic.
  int64_t floor_bytes = 0;
  int64_t floor_constant_bytes = 0;
  int64_t floor_locked_bytes = 0;
  std::string floor_op;         // the op at which the floor is reached
  std::vector<FloorMember> floor_members;  // the largest, at most 8
  std::vector<PlanPoint> points;           // each heuristic × each budget, in that order
  /// Per heuristic: the smallest feasible budget found by bisection (to
  /// PlanOptions::bisect_tolerance of the peak); outcome kOutOfMemory when
  /// even the peak was infeasible.
  std::vector<PlanPoint> smallest_feasible;
  PlanTimeline unbudgeted;
  PlanTimeline budgeted;        // at PlanOptions::timeline_fraction, or the smallest feasible
  std::vector<PeakShare> peak_by_op;  // largest first
  double simulate_seconds = 0;  // all simulations together
};

struct PlanOptions {
  /// Budgets as fractions of the recorded peak; each must be > 0.
  std::vector<double> fractions = {1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1};
  /// Budgets in bytes, in addition; each must be > 0.
  std::vector<int64_t> budget_bytes;
  /// Heuristics simulated; empty: the global runtime's.
  std::vector<Heuristic> heuristics;
  /// Search each heuristic's smallest feasible budget.
  bool bisect = true;
  /// Bisection stops when the bracket is narrower than this fraction of the peak.
  double bisect_tolerance = 0.005;
  /// Unrecorded steps before the recorded one. Two by default: the first
  /// step of a training loop creates the optimizer state, whose lineage
  /// (cloned from the first gradients) lasts into the second; the third is
  /// the steady state every later step starts from.
  int warmup_steps = 2;
  /// The device whose budget is planned; default: default_device().
  std::optional<Device> device;
  /// Budget of PlanReport::budgeted as a fraction of the peak; default: the
  /// first heuristic's smallest feasible budget (or 0.5 without bisection).
  std::optional<double> timeline_fraction;
  /// A simulation that replays more than this many ops per recorded op is
  /// stopped as thrashing (PlanOutcome::kThrash).
  double max_replay_factor = 50;
};

/// Runs `step` options.warmup_steps times, then once more recording it,
/// each time with no memory budget on any device (the budgets in force are
/// restored afterwards, with their evictions if the resident bytes exceed
/// them), and simulates every budget of `options` for every heuristic.
/// The global runtime's sampling mode and DTR_MIN_EVICT_BYTES are used.
/// Throws ValueError for a budget ≤ 0 or an empty budget list, a negative
/// warmup_steps or a bisect_tolerance outside (0, 1), ValueError when the
/// step recorded no op on the device; whatever `step` throws passes through
/// (the recording is dropped and the budgets restored).
PlanReport plan(const std::function<void()>& step, const PlanOptions& options = {});
/// plan() with `fractions` as the budgets.
PlanReport plan(const std::function<void()>& step, const std::vector<double>& fractions);

/// The slowdown a plan allows where nothing says otherwise: the examples'
/// --max-slowdown default, and the threshold plan_svg marks by default.
inline constexpr double kDefaultMaxSlowdown = 1.25;

/// The smallest budget in `report` (grid points and bisection results, for
/// the first heuristic) whose predicted slowdown is at most `max_slowdown`;
/// nullopt when none is. Throws ValueError for max_slowdown < 1.
std::optional<int64_t> choose_budget(const PlanReport& report, double max_slowdown);

/// The report as a table for a terminal: the recording, the floor and its
/// largest members, one row per budget and heuristic, the smallest
/// feasible budgets, and what is resident at the peak.
std::string format_plan(const PlanReport& report);
/// The report as a standalone SVG document: predicted slowdown against
/// budget for each heuristic (floor and smallest feasible budgets marked;
/// the first heuristic, the one choose_budget reads, drawn over the others),
/// the `max_slowdown` threshold and the budget choose_budget picks under it,
/// a sentence where no curve can be drawn; and the memory timeline,
/// unbudgeted and budgeted, with evictions and replays marked and the peak
/// annotated by producing op. Labels are placed so that none covers another.
/// Throws ValueError for max_slowdown < 1.
std::string plan_svg(const PlanReport& report, double max_slowdown = kDefaultMaxSlowdown);
/// Writes plan_svg(report, max_slowdown) to `path`. Throws ValueError
/// naming the path when it cannot be written.
void write_plan_svg(const PlanReport& report, const std::string& path,
                    double max_slowdown = kDefaultMaxSlowdown);

/// DTR_PLAN=path (called once, by Runtime::global() as it starts): records
/// every call of the op path into `rt` until exit, then plans the run as
/// plan_trace() does with default options, plus the budget DTR_MEMORY_BUDGET
/// gives the default device, and writes the table to stderr and
/// `<path>.txt` and the SVG to `<path>.svg` (a .txt or .svg ending of path
/// is dropped first; a path ending in '/' is a folder, which gets
/// dtr_plan.txt and dtr_plan.svg). Errors at exit are logged, never thrown.
void start_program_plan(Runtime& rt, const std::string& path);

// ---- lower level: one trace, many simulations -------------------------------------

/// Records one call of `step` (no warm-up, no budget on any device while it
/// runs; budgets restored afterwards). Throws what plan() throws.
std::shared_ptr<const StepTrace> record_step(const std::function<void()>& step);
/// Records `unmeasured` + `measured` calls of `step` as one trace (no
/// budget on any device meanwhile) whose counters restart after the first
/// `unmeasured`: simulate() then predicts a run that sets the budget, runs
/// `unmeasured` warm-up steps under it, resets the statistics and runs
/// `measured` more (what benchmarks/budget_sweep measures), with totals
/// over the measured steps and step_seconds their wall time together.
/// Throws ValueError for unmeasured < 0 or measured < 1, and what plan() throws.
std::shared_ptr<const StepTrace> record_steps(const std::function<void()>& step, int unmeasured, int measured);
/// How many calls of the step a trace's counters cover (1 for record_step).
int measured_steps(const StepTrace& trace);
/// Simulates `trace` under `budget_bytes` (nullopt: none) on `device` with
/// heuristic `h`. `timeline`, when given, receives the resident bytes per op.
PlanPoint simulate(const StepTrace& trace, Device device, std::optional<int64_t> budget_bytes,
                   Heuristic h, double max_replay_factor = 50, PlanTimeline* timeline = nullptr);
/// The report of `trace` (what plan() returns after recording).
PlanReport plan_trace(const StepTrace& trace, const PlanOptions& options = {});

}  // namespace dtr::remat
