// Budget sweep over the model zoo (benchmarks/models/): for each model, the
// unbudgeted peak and step time; then, for each eviction heuristic and each
// budget ratio, the step time under a budget of ratio × unbudgeted peak, its
// slowdown, peak and rematerialization counts, or "infeasible" when the
// runtime throws dtr::OutOfMemoryError; the smallest feasible ratio per
// model and heuristic by bisection; and two baselines: static checkpointing
// of round(√N) segments with no budget (Chen et al. 2016), and for the chain
// the Revolve optimum (Griewank) at the memory of each budget.
//
//   ./build/benchmarks/budget_sweep --out benchmarks/results/sweep.csv
//       [--models chain,gpt,resnet,unet,lstm] [--heuristics dtr_eq,dtr,...]
//       [--ratios 0.9,0.8,...] [--other-ratios 0.5,0.3] [--steps 5] [--warmup 2] [--threads 1]
//       [--max-slowdown 20] [--bisect-heuristics LIST] [--no-bisect] [--no-checkpoint]
//       [--predict-only]
//
// Beside every measured point stands the budget planner's prediction
// (remat/planner.h). A fresh workload from seed 0 is recorded with no budget
// for --warmup + --steps steps, its counters restarting after the warm-up
// (dtr::remat::record_steps): simulating that trace under a point's budget
// and heuristic (dtr::remat::simulate, default device) predicts exactly
// what measure() runs there: the budget set on the fresh workload, the
// warm-up steps under it, then the measured steps, whose counts both sides
// report per step. The bisection's probes (one warm-up step, one step) get
// a trace of their own, on which predicted_min_feasible_ratio is bisected
// (dtr::remat::plan_trace, to 0.001 of the recorded peak), as a ratio of the
// measured unbudgeted peak like `ratio`. Counts can still differ where
// the policy samples candidates (DTR_SAMPLE=sqrt with more than 128 of
// them): the sampler's state is the process's, advanced by earlier points.
// predicted_slowdown is (step time + Σ replayed ops' kernel times measured
// in the recording) / step time, against the measured `slowdown`
// (CPU-time ratio). simulate_ms is the wall time of that one simulation, to
// set against unbudgeted_ms. --predict-only measures the unbudgeted
// baseline (its peak sets the budgets) and writes predictions only: the
// other points' measured columns stay empty.
//
// Every point builds its model, optimizer and inputs afresh from seed 0, so
// points do not depend on each other. Counts in the CSV are per measured
// step (totals over --steps divided by --steps). Peaks are
// dtr::remat::stats().peak_bytes, the high-water mark of resident tensor
// storage bytes (parameters, gradients and optimizer state included), over
// the measured steps. Times are medians over the measured steps, of wall
// clock and of process CPU time; `slowdown` is the ratio of CPU times
// (robust where other work shares the cores; with --threads 1 it is the
// work done), `slowdown_wall` that of wall-clock times. Not a Google
// Benchmark: whole training steps under budgets that may fail.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "benchmarks/models/zoo.h"
#include "core/parallel.h"
#include "dtr/dtr.h"

namespace {

using dtr::zoo::Mode;
using dtr::zoo::ModelSpec;

struct Options {
  std::vector<std::string> models;
  std::vector<dtr::Heuristic> heuristics;
  std::vector<dtr::Heuristic> bisect_heuristics;  // empty: all of `heuristics`
  std::vector<double> ratios;
  std::optional<std::vector<double>> other_ratios;  // for every heuristic but dtr_eq
  int steps = 5;
  int warmup = 2;
  int threads = 1;
  double max_slowdown = 20;  // 0: no limit
  bool bisect = true;
  bool checkpoint = true;
  bool predict_only = false;  // measure only the unbudgeted baseline; predict every other point
  std::string out;
};

/// One configuration run for warmup + steps training steps.
struct Measurement {
  bool feasible = true;
  std::string error;  // the first line of the OutOfMemoryError, or why the point stopped early
  int steps_measured = 0;
  dtr::zoo::StepTimes times;
  int64_t peak_bytes = 0;
  int64_t resident_between_steps = 0;  // resident bytes after the warmup steps
  int64_t parameter_bytes = 0;
  dtr::remat::Stats stats;             // over the measured steps
};

/// Builds `spec`'s workload from seed 0 with no budget, then sets `budget`
/// and `heuristic` and runs `warmup` steps, resets the statistics and times
/// `steps` more. A warm-up step whose CPU time exceeds `max_step_cpu_ms`
/// when that is positive (thrashing near the smallest feasible budget can run for many minutes)
/// becomes the whole measurement: one step, and a note in `error`. The
/// budget is lifted again before the workload is dropped.
Measurement measure(const ModelSpec& spec, std::optional<int64_t> budget, dtr::Heuristic heuristic,
                    Mode mode, int warmup, int steps, double max_step_cpu_ms = 0) {
  Measurement m;
  auto& runtime = dtr::remat::Runtime::global();
  runtime.set_memory_budget(std::nullopt);
  runtime.set_heuristic(heuristic);
  {
    const std::unique_ptr<dtr::zoo::Workload> workload = spec.make(/*seed=*/0);
    m.parameter_bytes = workload->parameter_bytes();
    try {
      runtime.set_memory_budget(budget);
      bool stopped = false;
      for (int i = 0; i < warmup && !stopped; ++i) {
        dtr::remat::reset_stats();
        const dtr::zoo::StepTimes t = dtr::zoo::time_steps(*workload, mode, 1);
        if (max_step_cpu_ms > 0 && t.median_cpu_ms > max_step_cpu_ms) {
          stopped = true;
          m.times = t;
          m.steps_measured = 1;
          m.error = fmt::format("stopped after warm-up step {}: {:.0f} ms CPU, over the limit of {:.0f} ms", i + 1,
                                t.median_cpu_ms, max_step_cpu_ms);
        }
      }
      if (!stopped) {
        dtr::remat::reset_stats();
        m.resident_between_steps = dtr::remat::stats().resident_bytes;
        m.times = dtr::zoo::time_steps(*workload, mode, steps);
        m.steps_measured = steps;
      }
      m.stats = dtr::remat::stats();
      m.peak_bytes = m.stats.peak_bytes;
    } catch (const dtr::OutOfMemoryError& e) {
      m.feasible = false;
      const std::string what = e.what();
      m.error = what.substr(0, what.find('\n'));
    }
    runtime.set_memory_budget(std::nullopt);
  }
  runtime.set_heuristic(dtr::Heuristic::kDtrEq);
  return m;
}

// ---- Revolve (Griewank 1992; Griewank & Walther 2000) ---------------------------

/// β(s, t) = C(s + t, s), saturated at `cap` (only comparisons with l matter).
int64_t beta(int64_t s, int64_t t, int64_t cap) {
  if (t < 0) return 0;
  double b = 1;  // C(s + t, t) built as ∏_{i=1..t} (s + i) / i, exact in double for these sizes
  for (int64_t i = 1; i <= t; ++i) {
    b = b * double(s + i) / double(i);
    if (b > double(cap)) return cap + 1;
  }
  return int64_t(std::llround(b));
}

/// Minimal number of forward steps of binomial checkpointing for a chain of
/// l steps with s checkpoint slots: p(l, s) = t·l − β(s+1, t−1) with t such
/// that β(s, t−1) < l ≤ β(s, t). With s = 0 every state is recomputed from
/// the input: l(l−1)/2. -1 for s < 0 (not even the working set fits).
int64_t revolve_forward_steps(int64_t l, int64_t s) {
  if (s < 0) return -1;
  if (s == 0) return l * (l - 1) / 2;
  int64_t t = 1;
  while (beta(s, t, l) < l) ++t;
  return t * l - beta(s + 1, t - 1, std::numeric_limits<int64_t>::max() / 4);
}

// ---- output -------------------------------------------------------------------------

/// One CSV row. `point`: unbudgeted | budget | min_feasible | checkpoint.
struct Row {
  std::string model, point, heuristic;
  double ratio = 0;
  int64_t budget_bytes = -1;
  Measurement m;
  int steps = 0;
  dtr::zoo::StepTimes unbudgeted;
  int64_t unbudgeted_peak = 0;
  int64_t constant_bytes = 0;
  double layer_recomputations = -1;  // chain only
  int64_t revolve_slots = -1;        // chain only
  int64_t revolve_recomputations = -1;
  bool measured = true;                            // false: the point was only predicted
  std::optional<dtr::remat::PlanPoint> predicted;  // the planner's simulation of this point
  double predicted_min_ratio = -1;                 // min_feasible rows: the planner's bisection
};

class CsvWriter {
 public:
  explicit CsvWriter(const std::string& path) : out_(path) {
    if (!out_) {
      std::fprintf(stderr, "budget_sweep: cannot open '%s' for writing\n", path.c_str());
      std::exit(1);
    }
    out_ << "model,point,heuristic,ratio,budget_bytes,feasible,steps,median_ms,min_ms,median_cpu_ms,"
            "min_cpu_ms,slowdown,slowdown_wall,peak_bytes,unbudgeted_peak_bytes,unbudgeted_cpu_ms,"
            "unbudgeted_ms,constant_bytes,evictions_per_step,"
            "rematerializations_per_step,recomputed_ops_per_step,recomputed_flops_per_step,"
            "recompute_s_estimated_per_step,recompute_s_measured_per_step,loss,"
            "layer_recomputations_per_step,revolve_slots,revolve_recomputations,error,"
            "predicted_feasible,predicted_outcome,predicted_peak_bytes,predicted_evictions,"
            "predicted_rematerializations,predicted_recomputed_ops,predicted_recomputed_flops,"
            "predicted_recompute_s,predicted_slowdown,simulate_ms,predicted_min_feasible_ratio,"
            "predicted_error\n";
    out_.flush();
  }
  void write(const Row& r) {
    const double n = std::max(1, r.steps);
    const auto& st = r.m.stats;
    const bool ok = r.m.feasible && r.measured;
    auto num = [&](double v) { return ok ? fmt::format("{:.6g}", v) : std::string(); };
    std::string error = r.m.error;
    std::replace(error.begin(), error.end(), '"', '\'');
    const auto& t = r.m.times;
    out_ << fmt::format("{},{},{},{:.4f},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{},{},{},{},{},{},{},{},{},{},{},\"{}\",{}\n",
                        r.model, r.point, r.heuristic, r.ratio, r.budget_bytes,
                        r.measured ? std::to_string(ok ? 1 : 0) : "", r.measured ? std::to_string(r.steps) : "",
                        num(t.median_ms), num(t.min_ms), num(t.median_cpu_ms), num(t.min_cpu_ms),
                        num(t.median_cpu_ms / r.unbudgeted.median_cpu_ms), num(t.median_ms / r.unbudgeted.median_ms),
                        ok ? std::to_string(r.m.peak_bytes) : "", r.unbudgeted_peak, r.unbudgeted.median_cpu_ms,
                        r.unbudgeted.median_ms, r.constant_bytes, num(st.evictions / n), num(st.rematerializations / n),
                        num(st.recomputed_ops / n), num(st.recomputed_flops / n),
                        num(st.recompute_seconds_estimated / n), num(st.recompute_seconds_measured / n),
                        num(t.loss), r.layer_recomputations >= 0 ? num(r.layer_recomputations) : "",
                        r.revolve_slots >= 0 ? std::to_string(r.revolve_slots) : "",
                        r.revolve_recomputations >= 0 ? std::to_string(r.revolve_recomputations) : "",
                        error, predicted_columns(r));
    out_.flush();
  }

 private:
  /// The predicted_* columns of `r` (empty where the point was not simulated).
  static std::string predicted_columns(const Row& r) {
    const std::string min_ratio =
        r.predicted_min_ratio >= 0 ? fmt::format("{:.4f}", r.predicted_min_ratio) : std::string();
    if (!r.predicted) return ",,,,,,,,,," + min_ratio + ",";
    const dtr::remat::PlanPoint& p = *r.predicted;
    const bool ok = p.feasible();
    auto num = [&](double v) { return ok ? fmt::format("{:.6g}", v) : std::string(); };
    std::string error = p.error;
    std::replace(error.begin(), error.end(), '"', '\'');
    return fmt::format("{},{},{},{},{},{},{},{},{},{:.3f},{},\"{}\"", ok ? 1 : 0,
                       dtr::remat::plan_outcome_name(p.outcome), ok ? std::to_string(p.peak_bytes) : "",
                       num(double(p.evictions)), num(double(p.rematerializations)),
                       num(double(p.recomputed_ops)), num(p.recomputed_flops), num(p.recompute_seconds),
                       num(p.predicted_slowdown), 1e3 * p.simulate_seconds, min_ratio, error);
  }

  std::ofstream out_;
};

/// The prediction beside a logged point: outcome, replayed ops and slowdown.
std::string predicted_text(const Row& r) {
  std::string out;
  if (r.predicted) {
    const dtr::remat::PlanPoint& p = *r.predicted;
    out = p.feasible() ? fmt::format("  | predicted: remat ops {:7d}  x{:.3f}  peak {:7.1f} MiB  ({:.2f} ms)",
                                     p.recomputed_ops, p.predicted_slowdown,
                                     double(p.peak_bytes) / (1 << 20), 1e3 * p.simulate_seconds)
                       : fmt::format("  | predicted: {} ({:.2f} ms)", dtr::remat::plan_outcome_name(p.outcome),
                                     1e3 * p.simulate_seconds);
  }
  if (r.predicted_min_ratio >= 0) out += fmt::format("  min ratio {:.4f}", r.predicted_min_ratio);
  return out;
}

void log_row(const Row& r) {
  if (!r.measured) {
    std::fprintf(stderr, "  %-7s %-12s %-9s ratio %.3f  not measured%s\n", r.model.c_str(), r.point.c_str(),
                 r.heuristic.c_str(), r.ratio, predicted_text(r).c_str());
    return;
  }
  if (!r.m.feasible) {
    std::fprintf(stderr, "  %-7s %-12s %-9s ratio %.3f  infeasible%s\n", r.model.c_str(), r.point.c_str(),
                 r.heuristic.c_str(), r.ratio, predicted_text(r).c_str());
    return;
  }
  std::fprintf(stderr,
               "  %-7s %-12s %-9s ratio %.3f  %8.1f ms (cpu %8.1f)  x%.3f  peak %7.1f MiB  evict %7.0f  remat ops %7.0f%s%s\n",
               r.model.c_str(), r.point.c_str(), r.heuristic.c_str(), r.ratio, r.m.times.median_ms,
               r.m.times.median_cpu_ms, r.m.times.median_cpu_ms / r.unbudgeted.median_cpu_ms,
               double(r.m.peak_bytes) / (1 << 20),
               double(r.m.stats.evictions) / std::max(1, r.steps),
               double(r.m.stats.recomputed_ops) / std::max(1, r.steps),
               r.revolve_recomputations >= 0
                   ? fmt::format("  layers {:.1f} vs Revolve {} (s={})", r.layer_recomputations,
                                 r.revolve_recomputations, r.revolve_slots)
                         .c_str()
                   : "",
               predicted_text(r).c_str());
}

// ---- the sweep ------------------------------------------------------------------------

struct Baseline {
  dtr::zoo::StepTimes times;
  int64_t peak = 0;
  int64_t constant_bytes = 0;
};

/// Fills the chain's Revolve columns. Revolve's model: a slot holds one
/// layer's input (batch·width floats); the backward of a layer recomputes
/// that layer's forward from its input, so p(l, s) counts every layer
/// forward beyond the plain step's. Slots s = ⌊(budget − bytes that are
/// never activations) / slot bytes⌋, capped at l − 1, where the bytes that
/// are never activations are the resident bytes between steps less the
/// gradients (parameters, optimizer state, inputs): Revolve is granted the
/// gradients' memory and no working set, so p is a lower bound at that
/// budget. dtr's count is its recomputed FLOPs in units of one layer's
/// forward GEMM (2·batch·width² FLOPs), so a replayed GELU or bias counts
/// as a small fraction of a layer.
void add_revolve(const dtr::zoo::ChainShape& c, Row& r) {
  const int64_t state_bytes = c.batch * c.width * int64_t(sizeof(float));
  const int64_t budget = r.budget_bytes > 0 ? r.budget_bytes : r.m.peak_bytes;
  const int64_t never_activations = r.constant_bytes - r.m.parameter_bytes;
  r.revolve_slots = budget < never_activations
                        ? -1
                        : std::min<int64_t>(c.layers - 1, (budget - never_activations) / state_bytes);
  r.revolve_recomputations = r.revolve_slots >= 0 ? revolve_forward_steps(c.layers, r.revolve_slots) : -1;
  const double layer_flops = 2.0 * double(c.batch) * double(c.width) * double(c.width);
  r.layer_recomputations = r.m.feasible ? double(r.m.stats.recomputed_flops) / r.steps / layer_flops : -1;
  if (r.point == "checkpoint") {
    // dtr::checkpoint_sequential recomputes its checkpointed segments outside
    // the runtime's statistics: every segment but the last, each of
    // layers / segments layers, runs twice.
    const int64_t segments = dtr::zoo::checkpoint_segments(c.layers);
    r.layer_recomputations = double((segments - 1) * (c.layers / segments));
  }
}

/// The planner's view of one model: what measure() runs, recorded once
/// with no budget from a fresh workload (dtr::remat::record_steps): warm-up
/// steps, then measured ones whose counts the simulation reports.
struct Prediction {
  std::shared_ptr<const dtr::remat::StepTrace> trace;
  dtr::Device device;
  int64_t peak = 0;        // the measured steps' unbudgeted peak
  double record_ms = 0;    // wall time of the recording (all its steps)

  /// The simulation of `trace` under `budget` with `h`, its counts per
  /// measured step (as the measured columns are).
  dtr::remat::PlanPoint simulate(std::optional<int64_t> budget, dtr::Heuristic h) const {
    dtr::remat::PlanPoint p = dtr::remat::simulate(*trace, device, budget, h);
    const int n = dtr::remat::measured_steps(*trace);
    p.evictions /= n;
    p.rematerializations /= n;
    p.recomputed_ops /= n;
    p.recomputed_flops /= n;
    p.recompute_seconds /= n;
    p.recompute_seconds_estimated /= n;
    return p;
  }
  /// The smallest feasible budget of `h` on the trace (bisection to 0.001 of
  /// the recorded peak), as a ratio of `measured_peak`; -1 when even the
  /// recorded peak is infeasible.
  double min_feasible_ratio(dtr::Heuristic h, int64_t measured_peak) const {
    dtr::remat::PlanOptions options;
    options.fractions = {1.0};
    options.heuristics = {h};
    options.bisect_tolerance = 0.001;
    options.device = device;
    options.timeline_fraction = 1.0;
    const dtr::remat::PlanReport report = dtr::remat::plan_trace(*trace, options);
    if (report.smallest_feasible.empty() || !report.smallest_feasible.front().feasible()) return -1;
    return double(report.smallest_feasible.front().budget_bytes) / double(measured_peak);
  }
};

/// Builds `spec`'s workload from seed 0 and records `warmup` + `steps`
/// steps with no budget, the counters restarting after the warm-up: a
/// simulation then predicts measure(spec, budget, h, kPlain, warmup, steps).
Prediction record(const ModelSpec& spec, int warmup, int steps) {
  auto& runtime = dtr::remat::Runtime::global();
  runtime.set_memory_budget(std::nullopt);
  runtime.set_heuristic(dtr::Heuristic::kDtrEq);
  Prediction p;
  p.device = dtr::default_device();
  const std::unique_ptr<dtr::zoo::Workload> workload = spec.make(/*seed=*/0);
  const auto t0 = std::chrono::steady_clock::now();
  p.trace = dtr::remat::record_steps([&] { workload->step(Mode::kPlain); }, warmup, steps);
  p.record_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  p.peak = p.simulate(std::nullopt, dtr::Heuristic::kDtrEq).peak_bytes;
  return p;
}

void sweep_model(const ModelSpec& spec, const Options& o, CsvWriter& csv) {
  std::fprintf(stderr, "== %s: %s\n", spec.name.c_str(), spec.description.c_str());
  const Measurement base = measure(spec, std::nullopt, dtr::Heuristic::kDtrEq, Mode::kPlain, o.warmup, o.steps);
  if (!base.feasible) {
    std::fprintf(stderr, "budget_sweep: %s failed without a budget: %s\n", spec.name.c_str(), base.error.c_str());
    std::exit(1);
  }
  const Baseline b{base.times, base.peak_bytes, base.resident_between_steps};
  const double limit = o.max_slowdown * base.times.median_cpu_ms;  // 0: no limit
  const int64_t parameter_bytes = base.parameter_bytes;
  const Prediction plan = record(spec, o.warmup, o.steps);
  // The bisection's probes run one warm-up step and one measured step.
  const Prediction probe = o.bisect ? record(spec, 1, 1) : plan;
  std::fprintf(stderr, "  %-7s recorded one step: %.1f ms, peak %.1f MiB (measured %.1f MiB)\n",
               spec.name.c_str(), plan.record_ms, double(plan.peak) / (1 << 20), double(b.peak) / (1 << 20));

  struct Predicted {
    std::optional<dtr::remat::PlanPoint> point;
    double min_ratio = -1;
  };
  auto row = [&](std::string point, std::string heuristic, double ratio, int64_t budget, Measurement m,
                 int steps, Predicted predicted, bool measured = true) {
    Row r{spec.name, std::move(point), std::move(heuristic), ratio, budget, std::move(m), steps,
          b.times, b.peak, b.constant_bytes};
    r.m.parameter_bytes = parameter_bytes;
    if (r.m.feasible) r.steps = r.m.steps_measured;
    r.measured = measured;
    r.predicted = std::move(predicted.point);
    r.predicted_min_ratio = predicted.min_ratio;
    if (spec.chain) add_revolve(*spec.chain, r);
    csv.write(r);
    log_row(r);
  };
  row("unbudgeted", "none", 1.0, -1, base, o.steps, {plan.simulate(std::nullopt, dtr::Heuristic::kDtrEq)});

  if (o.checkpoint && !o.predict_only) {
    const Measurement ck = measure(spec, std::nullopt, dtr::Heuristic::kDtrEq, Mode::kCheckpoint, o.warmup, o.steps);
    row("checkpoint", "static_sqrt", double(ck.peak_bytes) / double(b.peak), -1, ck, o.steps, {});
  }

  for (const dtr::Heuristic h : o.heuristics) {
    const std::string name(dtr::heuristic_name(h));
    std::map<double, bool> feasible;  // ratio → feasible, from the grid and the probes
    const bool primary = h == dtr::Heuristic::kDtrEq || !o.other_ratios;
    for (const double ratio : primary ? o.ratios : *o.other_ratios) {
      const auto budget = int64_t(ratio * double(b.peak));
      Predicted predicted{plan.simulate(budget, h)};
      if (o.predict_only) {
        row("budget", name, ratio, budget, Measurement{}, 0, std::move(predicted), /*measured=*/false);
        continue;
      }
      const Measurement m = measure(spec, budget, h, Mode::kPlain, o.warmup, o.steps, limit);
      feasible[ratio] = m.feasible;
      row("budget", name, ratio, budget, m, o.steps, std::move(predicted));
    }
    const bool bisect_this =
        o.bisect && (o.bisect_heuristics.empty() ||
                     std::find(o.bisect_heuristics.begin(), o.bisect_heuristics.end(), h) != o.bisect_heuristics.end());
    if (!bisect_this) continue;
    const double predicted_min = probe.min_feasible_ratio(h, b.peak);
    if (o.predict_only) {
      const double ratio = predicted_min >= 0 ? predicted_min : 1.0;
      const auto budget = int64_t(ratio * double(b.peak));
      row("min_feasible", name, ratio, budget, Measurement{}, 0, {probe.simulate(budget, h), predicted_min},
          /*measured=*/false);
      continue;
    }
    // Smallest feasible ratio, to 0.01: hi = the smallest feasible ratio seen
    // (1.0, the unbudgeted peak, when none was), lo = the largest infeasible
    // one below it (0 when none). Probes run one warm-up step and one step.
    double hi = 1.0, lo = 0.0;
    for (const auto& [ratio, ok] : feasible) {
      if (ok) {
        hi = ratio;
        break;
      }
    }
    for (const auto& [ratio, ok] : feasible) {
      if (!ok && ratio < hi) lo = std::max(lo, ratio);
    }
    Measurement at_hi;
    bool have_hi = false;
    while (hi - lo > 0.01 + 1e-9) {
      const double mid = 0.5 * (lo + hi);
      Measurement m = measure(spec, int64_t(mid * double(b.peak)), h, Mode::kPlain, 1, 1, limit);
      std::fprintf(stderr, "  %-7s probe        %-9s ratio %.4f  %s\n", spec.name.c_str(), name.c_str(), mid,
                   m.feasible ? "feasible" : "infeasible");
      if (m.feasible) {
        hi = mid;
        at_hi = std::move(m);
        have_hi = true;
      } else {
        lo = mid;
      }
    }
    if (!have_hi) at_hi = measure(spec, int64_t(hi * double(b.peak)), h, Mode::kPlain, 1, 1, limit);
    const auto budget = int64_t(hi * double(b.peak));
    row("min_feasible", name, hi, budget, at_hi, 1, {probe.simulate(budget, h), predicted_min});
  }
}

// ---- command line ------------------------------------------------------------------------

[[noreturn]] void usage(const char* argv0, const std::string& error = "") {
  if (!error.empty()) std::fprintf(stderr, "budget_sweep: %s\n", error.c_str());
  std::fprintf(stderr,
               "usage: %s --out CSV [--models LIST] [--heuristics LIST] [--ratios LIST]\n"
               "          [--other-ratios LIST] [--steps N] [--warmup N] [--threads N]\n"
               "          [--max-slowdown X] [--bisect-heuristics LIST] [--no-bisect] [--no-checkpoint]\n"
               "          [--predict-only]\n"
               "  --models      comma list of chain,gpt,resnet,unet,lstm,llama,unet_gn,moe,chain_b2048\n"
               "                (default: chain,gpt,resnet,unet,lstm)\n"
               "  --heuristics  comma list (default dtr_eq,dtr,dtr_local,lru,size,msps)\n"
               "  --ratios      budgets as fractions of the unbudgeted peak (default 0.9,...,0.1)\n"
               "  --other-ratios  ratios for every heuristic but dtr_eq (default: --ratios)\n"
               "  --steps       measured steps per point (default 5), after --warmup (default 2)\n"
               "  --max-slowdown  a point whose warm-up step takes more than this many times the\n"
               "                unbudgeted step's CPU time is measured by that step alone (default 20, 0 = off)\n"
               "  --bisect-heuristics  heuristics whose smallest feasible ratio is searched\n"
               "                (default: all of --heuristics)\n"
               "  --predict-only  measure only the unbudgeted baseline and write the planner's\n"
               "                predictions for every other point (no checkpoint rows)\n",
               argv0);
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int parse_int(const char* argv0, const std::string& flag, const std::string& text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > 1'000'000) {
    usage(argv0, fmt::format("{} expects an integer >= {}, got '{}'", flag, min, text));
  }
  return int(v);
}

std::vector<dtr::Heuristic> parse_heuristics(const char* argv0, const std::string& text) {
  std::vector<dtr::Heuristic> out;
  for (const std::string& name : split(text)) {
    const auto h = dtr::parse_heuristic(name);
    if (!h.ok()) usage(argv0, std::string(h.status().message()));
    out.push_back(*h);
  }
  if (out.empty()) usage(argv0, "empty heuristic list");
  return out;
}

std::vector<double> parse_ratios(const char* argv0, const std::string& text) {
  std::vector<double> out;
  for (const std::string& r : split(text)) {
    char* end = nullptr;
    const double v = std::strtod(r.c_str(), &end);
    if (*end != '\0' || !(v > 0 && v <= 1)) usage(argv0, "ratios must be numbers in (0, 1], got '" + r + "'");
    out.push_back(v);
  }
  if (out.empty()) usage(argv0, "empty ratio list");
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  o.heuristics = parse_heuristics(argv[0], "dtr_eq,dtr,dtr_local,lru,size,msps");
  for (int r = 9; r >= 1; --r) o.ratios.push_back(r / 10.0);
  for (const auto& m : dtr::zoo::models()) {
    if (m.in_default_sweep) o.models.push_back(m.name);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--models") {
      o.models = split(next());
    } else if (flag == "--heuristics") {
      o.heuristics = parse_heuristics(argv[0], next());
    } else if (flag == "--bisect-heuristics") {
      o.bisect_heuristics = parse_heuristics(argv[0], next());
    } else if (flag == "--ratios") {
      o.ratios = parse_ratios(argv[0], next());
    } else if (flag == "--other-ratios") {
      o.other_ratios = parse_ratios(argv[0], next());
    } else if (flag == "--steps") {
      o.steps = parse_int(argv[0], flag, next(), 1);
    } else if (flag == "--warmup") {
      o.warmup = parse_int(argv[0], flag, next(), 0);
    } else if (flag == "--threads") {
      o.threads = parse_int(argv[0], flag, next(), 1);
    } else if (flag == "--out") {
      o.out = next();
    } else if (flag == "--max-slowdown") {
      const std::string v = next();
      char* end = nullptr;
      o.max_slowdown = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.max_slowdown >= 0)) usage(argv[0], "--max-slowdown expects a number >= 0, got '" + v + "'");
    } else if (flag == "--no-bisect") {
      o.bisect = false;
    } else if (flag == "--no-checkpoint") {
      o.checkpoint = false;
    } else if (flag == "--predict-only") {
      o.predict_only = true;
    } else if (flag == "-h" || flag == "--help") {
      usage(argv[0]);
    } else {
      usage(argv[0], "unknown flag " + flag);
    }
  }
  if (o.out.empty()) usage(argv[0], "--out is required");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    std::vector<const ModelSpec*> specs;
    for (const std::string& name : o.models) specs.push_back(&dtr::zoo::find_model(name));
    dtr::set_num_threads(o.threads);
    CsvWriter csv(o.out);
    std::fprintf(stderr, "budget_sweep: %zu models, %zu heuristics, %zu ratios, %d+%d steps, %d thread(s) -> %s\n",
                 specs.size(), o.heuristics.size(), o.ratios.size(), o.warmup, o.steps, o.threads, o.out.c_str());
    for (const ModelSpec* spec : specs) sweep_model(*spec, o, csv);
  } catch (const dtr::ValueError& e) {
    std::fprintf(stderr, "budget_sweep: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "budget_sweep: %s\n", e.what());
    return 1;
  }
  return 0;
}
