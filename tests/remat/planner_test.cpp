// The budget planner (Note [planner]): a step recorded once and simulated
// under a budget predicts exactly the evictions, replays and recomputed
// FLOPs of a real run of that step under that budget; infeasible budgets
// are predicted infeasible; the floor is the constants plus the largest
// locked working set; bad input gives typed errors.
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "tests/child_process.h"
#include "tests/testing.h"

namespace dtr {
namespace {

// Restores an unlimited budget however the test ends.
struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> b) { remat::set_memory_budget(b); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};

Tensor data(IntList shape, double freq = 0.37) {
  std::vector<float> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i) * freq));
  return from_vector(v, shape);
}

Tensor targets(int64_t n, int64_t classes) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 7 + 3) % size_t(classes));
  return from_vector(v, {n});
}

// One model, its optimizer and its batch, built from a fixed seed; step()
// is zero_grad, forward, loss, backward, optimizer step.
class Workload {
 public:
  virtual ~Workload() = default;
  void step() {
    optimizer->zero_grad();
    Tensor l = loss();
    l.backward();
    optimizer->step();
  }
  virtual Tensor loss() = 0;
  std::unique_ptr<optim::Optimizer> optimizer;
};

// 16 hidden layers of Linear + GELU, AdamW (in-place state updates).
class Mlp final : public Workload {
 public:
  Mlp() {
    manual_seed(7);
    net = nn::Sequential();
    net->push_back(nn::Linear(32, 64));
    for (int i = 0; i < 15; ++i) {
      net->push_back(nn::GELU());
      net->push_back(nn::Linear(64, 64));
    }
    net->push_back(nn::GELU());
    net->push_back(nn::Linear(64, 10));
    optimizer = std::make_unique<optim::AdamW>(net->parameters());
    x = data({512, 32});
    y = targets(512, 10);
  }
  Tensor loss() override { return cross_entropy((*net)(x), y); }
  nn::Sequential net{nullptr};
  Tensor x, y;
};

// Two pre-norm transformer blocks with dropout on both residual branches
// (replays reuse the recorded Philox offsets), SGD with momentum.
class Transformer final : public Workload {
 public:
  static constexpr int64_t B = 16, T = 32, C = 32, H = 4, V = 20;
  Transformer() {
    manual_seed(11);
    auto param = [this](IntList shape, double scale) {
      Tensor t;
      {
        NoGradGuard ng;
        t = randn(shape) * scale;
      }
      t.requires_grad_();
      params.push_back(t);
      return t;
    };
    emb = param({V, C}, 0.3);
    for (int blk = 0; blk < 4; ++blk) {
      ln.push_back(param({C}, 0.1));
      qkv.push_back(param({3 * C, C}, 0.15));
      proj.push_back(param({C, C}, 0.15));
      up.push_back(param({4 * C, C}, 0.15));
      down.push_back(param({C, 4 * C}, 0.1));
    }
    head = param({V, C}, 0.2);
    optim::SGDOptions o;
    o.lr(0.05);
    o.momentum(0.9);
    optimizer = std::make_unique<optim::SGD>(params, o);
    std::vector<int64_t> ids(size_t(B * T)), next(size_t(B * T));
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = int64_t((i * 5) % V);
      next[i] = int64_t((i * 5 + 5) % V);
    }
    tokens = from_vector(ids, {B, T});
    labels = from_vector(next, {B * T});
  }
  Tensor loss() override {
    Tensor x = embedding(emb, tokens);
    for (size_t blk = 0; blk < ln.size(); ++blk) {
      Tensor h = layer_norm(x, {C}, ln[blk]);
      std::vector<Tensor> parts = chunk(linear(h, qkv[blk]), 3, -1);
      auto heads = [](const Tensor& t) { return t.view({B, T, H, C / H}).transpose(1, 2); };
      Tensor a = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), Tensor(), 0.0,
                                              /*is_causal=*/true);
      a = a.transpose(1, 2).contiguous().view({B, T, C});
      x = x + dropout(linear(a, proj[blk]), 0.1, true);
      Tensor f = gelu(linear(layer_norm(x, {C}, ln[blk]), up[blk]));
      x = x + dropout(linear(f, down[blk]), 0.1, true);
    }
    return cross_entropy(linear(x, head).view({B * T, V}), labels);
  }
  std::vector<Tensor> params, ln, qkv, proj, up, down;
  Tensor emb, head, tokens, labels;
};


// Convolutions with BatchNorm2d (running statistics: a side effect applied
// once per forward, never replayed) and residual adds; SGD.
class Cnn final : public Workload {
 public:
  Cnn() {
    manual_seed(5);
    net = nn::Sequential();
    stem = nn::Conv2d(1, 8, 3, 1, 1);
    bn = nn::BatchNorm2d(8);
    for (int i = 0; i < 8; ++i) convs.push_back(nn::Conv2d(8, 8, 3, 1, 1));
    fc = nn::Linear(8, 10);
    std::vector<Tensor> ps = stem->parameters();
    for (const Tensor& p : bn->parameters()) ps.push_back(p);
    for (const auto& c : convs)
      for (const Tensor& p : c->parameters()) ps.push_back(p);
    for (const Tensor& p : fc->parameters()) ps.push_back(p);
    optim::SGDOptions o;
    o.lr(0.05);
    optimizer = std::make_unique<optim::SGD>(ps, o);
    x = data({16, 1, 16, 16}, 0.21);
    y = targets(16, 10);
  }
  Tensor loss() override {
    Tensor h = relu((*bn)((*stem)(x)));
    for (auto& c : convs) h = relu(c(h)) + h;
    h = adaptive_avg_pool2d(max_pool2d(h, {2, 2}), {1, 1}).flatten(1);
    return cross_entropy((*fc)(h), y);
  }
  nn::Sequential net{nullptr};
  nn::Conv2d stem{nullptr};
  nn::BatchNorm2d bn{nullptr};
  std::vector<nn::Conv2d> convs;
  nn::Linear fc{nullptr};
  Tensor x, y;
};

using Factory = std::function<std::unique_ptr<Workload>()>;

// Two warm-up steps with no budget (the first creates the optimizer state,
// whose lineage, cloned from the first gradients, lasts into the second),
// then a recorded one; the statistics restart with it.
std::shared_ptr<const remat::StepTrace> warm_and_record(Workload& w) {
  remat::set_memory_budget(std::nullopt);
  w.step();
  w.step();
  remat::reset_stats();
  return remat::record_step([&] { w.step(); });
}

// For each fraction: a fresh workload, two warm-up steps, one recorded step,
// its prediction; then a real step from the same state under that budget.
void expect_prediction_matches(const Factory& make, const std::vector<double>& fractions) {
  remat::set_memory_budget(std::nullopt);
  for (const double f : fractions) {
    SCOPED_TRACE("fraction " + std::to_string(f));
    std::unique_ptr<Workload> w = make();
    const auto trace = warm_and_record(*w);
    const int64_t real_peak = remat::stats().peak_bytes;
    remat::PlanOptions o;
    o.fractions = {f};
    o.bisect = false;
    const remat::PlanReport report = remat::plan_trace(*trace, o);
    EXPECT_EQ(report.peak_bytes, real_peak);
    ASSERT_EQ(report.points.size(), 1u);
    const remat::PlanPoint& p = report.points[0];
    if (!p.feasible()) {
      EXPECT_EQ(p.outcome, remat::PlanOutcome::kOutOfMemory);
      BudgetScope scope(p.budget_bytes);
      EXPECT_THROW(w->step(), OutOfMemoryError) << "predicted: " << p.error;
      ADD_FAILURE() << "infeasible (as predicted): " << p.error;
      continue;
    }
    remat::Stats s;
    {
      BudgetScope scope(p.budget_bytes);
      remat::reset_stats();
      w->step();
      s = remat::stats();
    }
    EXPECT_EQ(p.evictions, s.evictions);
    EXPECT_EQ(p.rematerializations, s.rematerializations);
    EXPECT_EQ(p.recomputed_ops, s.recomputed_ops);
    EXPECT_EQ(p.recomputed_flops, s.recomputed_flops);
    EXPECT_EQ(p.peak_bytes, s.peak_bytes);
    EXPECT_DOUBLE_EQ(p.recompute_seconds_estimated, s.recompute_seconds_estimated);
    EXPECT_LE(p.peak_bytes, p.budget_bytes);
    if (f < 0.9) {
      EXPECT_GT(p.recomputed_ops, 0);
    }
    EXPECT_GE(p.predicted_slowdown, 1.0);
  }
}

TEST(Planner, MlpCountsEqualARealBudgetedRun) {
  expect_prediction_matches([] { return std::make_unique<Mlp>(); }, {0.5, 0.3});
}

TEST(Planner, TransformerWithDropoutCountsEqualARealBudgetedRun) {
  expect_prediction_matches([] { return std::make_unique<Transformer>(); }, {0.5, 0.3});
}

TEST(Planner, CnnWithBatchNormCountsEqualARealBudgetedRun) {
  expect_prediction_matches([] { return std::make_unique<Cnn>(); }, {0.5, 0.3});
}

// A budget below what one op needs is predicted infeasible, and a real run
// under it fails the same way.
TEST(Planner, InfeasibleBudgetIsPredictedInfeasible) {
  Mlp w;
  const auto trace = warm_and_record(w);
  remat::PlanOptions o;
  o.fractions = {0.02};
  o.bisect = false;
  const remat::PlanReport r = remat::plan_trace(*trace, o);
  ASSERT_EQ(r.points.size(), 1u);
  EXPECT_EQ(r.points[0].outcome, remat::PlanOutcome::kOutOfMemory);
  EXPECT_FALSE(r.points[0].error.empty());
  EXPECT_LT(r.points[0].budget_bytes, r.floor_bytes);
  BudgetScope scope(r.points[0].budget_bytes);
  EXPECT_THROW(w.step(), OutOfMemoryError);
}

// The floor is the constants plus the largest locked working set: with a
// 1 MiB constant A, exp(A) → b, exp(b) → c, c + b → d, the floor is at the
// add: its inputs and output (3 MiB) locked, plus A.
TEST(Planner, FloorIsConstantsPlusTheLargestLockedWorkingSet) {
  remat::set_memory_budget(std::nullopt);
  constexpr int64_t kN = 262144;  // floats: 1 MiB
  const Tensor a = data({kN});
  auto step = [&] {
    Tensor b = exp(a);
    Tensor c = exp(b);
    Tensor d = c + b;
    EXPECT_TRUE(std::isfinite(d.sum().item<float>()));
  };
  remat::PlanOptions o;
  o.fractions = {1.0, 0.5};
  o.warmup_steps = 0;
  const remat::PlanReport r = remat::plan(step, o);
  const int64_t mib = kN * 4;
  EXPECT_EQ(r.floor_bytes, 4 * mib);
  EXPECT_EQ(r.floor_locked_bytes, 3 * mib);
  EXPECT_EQ(r.floor_constant_bytes, mib);
  EXPECT_EQ(r.floor_op, "add");
  ASSERT_GE(r.floor_members.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.floor_members[i].bytes, mib);
  EXPECT_EQ(r.peak_bytes, 4 * mib + 4);  // and the sum's scalar after d
  EXPECT_EQ(r.start_resident_bytes, mib);
  EXPECT_EQ(r.ops, 4);
  // Half the peak is below the floor: infeasible. The smallest feasible
  // budget is the floor (to the bisection's tolerance), never below it.
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_TRUE(r.points[0].feasible());
  EXPECT_EQ(r.points[0].evictions, 0);
  EXPECT_FALSE(r.points[1].feasible());
  ASSERT_EQ(r.smallest_feasible.size(), 1u);
  const remat::PlanPoint& m = r.smallest_feasible[0];
  ASSERT_TRUE(m.feasible());
  EXPECT_GE(m.budget_bytes, r.floor_bytes);
  EXPECT_LE(m.budget_bytes, r.floor_bytes + int64_t(0.005 * double(r.peak_bytes)) + 4);
  // The peak's residents by producing op: A (constant), b, c, d.
  int64_t total = 0;
  for (const remat::PeakShare& share : r.peak_by_op) total += share.bytes;
  EXPECT_EQ(total, r.peak_bytes);
  ASSERT_FALSE(r.peak_by_op.empty());
  EXPECT_EQ(r.peak_by_op[0].op, "exp");
  EXPECT_EQ(r.peak_by_op[0].bytes, 2 * mib);
  // One timeline sample per op; the budgeted one stays under its budget.
  EXPECT_EQ(r.unbudgeted.resident_bytes.size(), 4u);
  EXPECT_EQ(r.unbudgeted.tick.size(), 4u);
  EXPECT_EQ(r.budgeted.budget_bytes, m.budget_bytes);
  for (int64_t bytes : r.budgeted.resident_bytes) EXPECT_LE(bytes, r.budgeted.budget_bytes);
}

// The predicted smallest feasible budget is feasible in a real run, and
// the largest infeasible one the bisection probed just below it fails.
TEST(Planner, SmallestFeasibleBudgetHoldsInARealRun) {
  Mlp w;
  const auto trace = warm_and_record(w);
  remat::PlanOptions o;
  o.fractions = {0.5, 0.3};
  const remat::PlanReport r = remat::plan_trace(*trace, o);
  ASSERT_EQ(r.smallest_feasible.size(), 1u);
  const remat::PlanPoint& m = r.smallest_feasible[0];
  ASSERT_TRUE(m.feasible()) << m.error;
  EXPECT_LT(m.fraction, 0.3);
  EXPECT_GE(m.budget_bytes, r.floor_bytes);
  {
    BudgetScope scope(m.budget_bytes);
    remat::reset_stats();
    w.step();
    EXPECT_EQ(remat::stats().recomputed_ops, m.recomputed_ops);
    EXPECT_LE(remat::stats().peak_bytes, m.budget_bytes);
  }
  const int64_t below = m.budget_bytes - int64_t(0.005 * double(r.peak_bytes)) - 1;
  const remat::PlanPoint p = remat::simulate(*trace, r.device, below, remat::Runtime::global().heuristic());
  EXPECT_FALSE(p.feasible());
  BudgetScope scope(below);
  EXPECT_THROW(w.step(), OutOfMemoryError);
}

TEST(Planner, EveryHeuristicIsSimulated) {
  remat::set_memory_budget(std::nullopt);
  auto w = std::make_unique<Transformer>();
  remat::PlanOptions o;
  o.fractions = {0.6, 0.4};
  o.heuristics = {Heuristic::kDtrEq, Heuristic::kDtr, Heuristic::kDtrLocal, Heuristic::kLru, Heuristic::kSize,
                  Heuristic::kMsps};
  const remat::PlanReport r = remat::plan([&] { w->step(); }, o);
  ASSERT_EQ(r.points.size(), 12u);
  ASSERT_EQ(r.smallest_feasible.size(), 6u);
  for (size_t i = 0; i < r.points.size(); ++i) {
    EXPECT_EQ(r.points[i].heuristic, o.heuristics[i / 2]);
    if (r.points[i].feasible()) {
      EXPECT_LE(r.points[i].peak_bytes, r.points[i].budget_bytes);
      EXPECT_GE(r.points[i].predicted_slowdown, 1.0);
    }
  }
  EXPECT_GT(r.step_seconds, 0);
  EXPECT_GT(r.kernel_seconds, 0);
  EXPECT_GT(r.simulate_seconds, 0);
  // The budgets in force before plan() are in force after it.
  EXPECT_FALSE(remat::memory_budget().has_value());
}

TEST(Planner, BadInputGivesTypedErrors) {
  remat::set_memory_budget(std::nullopt);
  const Tensor a = data({64});
  auto step = [&] { (void)exp(a).sum().item<float>(); };
  remat::PlanOptions o;
  o.fractions = {0.5, 0.0};
  EXPECT_THROW(remat::plan(step, o), ValueError);
  o.fractions = {-1.0};
  EXPECT_THROW(remat::plan(step, o), ValueError);
  o.fractions = {};
  EXPECT_THROW(remat::plan(step, o), ValueError);
  o.fractions = {0.5};
  o.budget_bytes = {0};
  EXPECT_THROW(remat::plan(step, o), ValueError);
  o.budget_bytes = {};
  o.warmup_steps = -1;
  EXPECT_THROW(remat::plan(step, o), ValueError);
  o.warmup_steps = 0;
  o.bisect_tolerance = 0;
  EXPECT_THROW(remat::plan(step, o), ValueError);
  o.bisect_tolerance = 0.01;
  EXPECT_THROW(remat::plan(std::function<void()>(), o), ValueError);
  EXPECT_THROW(remat::plan([] {}, o), ValueError);  // no op: nothing to plan
  const auto trace = remat::record_step(step);
  EXPECT_THROW(remat::simulate(*trace, Device(kCPU), int64_t{0}, Heuristic::kDtrEq), ValueError);
  EXPECT_THROW(remat::simulate(*trace, Device(kCPU), int64_t{-5}, Heuristic::kDtrEq), ValueError);
}

// A step that throws: its error passes through, the budget comes back and
// nothing is recorded afterwards (later ops run as usual).
TEST(Planner, AStepThatThrowsLeavesNothingBehind) {
  BudgetScope budget(int64_t{1} << 30);
  const Tensor a = data({64});
  int calls = 0;
  auto step = [&] {
    (void)exp(a);
    if (++calls == 2) throw IndexError("step failed");
  };
  remat::PlanOptions o;
  o.warmup_steps = 1;
  EXPECT_THROW(remat::plan(step, o), IndexError);
  EXPECT_EQ(remat::memory_budget(), int64_t{1} << 30);
  EXPECT_EQ(calls, 2);
  const Tensor b = exp(a) + 1.0;
  EXPECT_FLOAT_EQ(b.to_vector<float>()[0], std::exp(std::sin(0.0f)) + 1.0f);
  // A second plan of a good step works after the failed one.
  calls = 10;
  const remat::PlanReport r = remat::plan(step, o);
  EXPECT_EQ(r.ops, 1);
}

// DTR_PLAN records a whole program with no budget (DTR_MEMORY_BUDGET is
// planned, not applied) and writes the table and the SVG at exit.
TEST(Planner, DtrPlanPlansAWholeProgramAtExit) {
  const auto exe = testing::built_program("tests", "dtr_plan_child");
  ASSERT_TRUE(exe.has_value()) << "dtr_plan_child is built with the tests";
  testing::TempDir dir;
  const std::string base = (dir.path / "run").string();
  const testing::Output r =
      testing::run_child(*exe, {}, {{"DTR_PLAN", base + ".svg"}, {"DTR_MEMORY_BUDGET", "300KiB"}});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_NE(r.out.find("evictions 0 recomputed_ops 0 budget none"), std::string::npos) << r.all();
  EXPECT_NE(r.err.find("DTR_MEMORY_BUDGET is planned, not applied"), std::string::npos) << r.all();
  const std::string table = testing::read_all(dir.path / "run.txt");
  const std::string svg = testing::read_all(dir.path / "run.svg");
  EXPECT_NE(table.find("dtr_eq"), std::string::npos) << table;
  EXPECT_NE(table.find("0.29"), std::string::npos) << "300 KiB as MiB:\n" << table;
  EXPECT_NE(r.err.find(table.substr(0, 40)), std::string::npos) << r.all();
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // The same program without DTR_PLAN: its losses are the planned run's.
  const testing::Output plain = testing::run_child(*exe, {}, {});
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  EXPECT_EQ(plain.out, r.out);
  // An unwritable path: the run still succeeds; the error is logged.
  const testing::Output bad = testing::run_child(*exe, {}, {{"DTR_PLAN", "/nonexistent/dir/plan"}});
  EXPECT_EQ(bad.exit_code, 0) << bad.all();
  EXPECT_NE(bad.err.find("no plan written"), std::string::npos) << bad.all();
}

// record_steps: warm-up steps under the budget, then measured ones (what
// the budget sweep measures), predicted from a fresh workload's state.
TEST(Planner, RecordStepsPredictsWarmUpThenMeasuredSteps) {
  remat::set_memory_budget(std::nullopt);
  int64_t budget = 0;
  {
    Mlp w;
    w.step();
    w.step();
    remat::reset_stats();
    w.step();
    budget = remat::stats().peak_bytes * 4 / 10;
  }
  std::shared_ptr<const remat::StepTrace> trace;
  {
    Mlp fresh;
    trace = remat::record_steps([&] { fresh.step(); }, 2, 2);
    EXPECT_THROW(remat::record_steps([&] { fresh.step(); }, -1, 1), ValueError);
    EXPECT_THROW(remat::record_steps([&] { fresh.step(); }, 0, 0), ValueError);
  }
  EXPECT_EQ(remat::measured_steps(*trace), 2);
  const remat::PlanPoint p = remat::simulate(*trace, Device(kCPU), budget, remat::Runtime::global().heuristic());
  ASSERT_TRUE(p.feasible()) << p.error;
  EXPECT_GT(p.recomputed_ops, 0);
  Mlp real;
  BudgetScope scope(budget);
  real.step();
  real.step();
  remat::reset_stats();
  real.step();
  real.step();
  const remat::Stats s = remat::stats();
  EXPECT_EQ(p.evictions, s.evictions);
  EXPECT_EQ(p.rematerializations, s.rematerializations);
  EXPECT_EQ(p.recomputed_ops, s.recomputed_ops);
  EXPECT_EQ(p.recomputed_flops, s.recomputed_flops);
  EXPECT_EQ(p.peak_bytes, s.peak_bytes);
}

// In-place writes into activations (old versions that inherit lineage and
// never get bytes of their own): the simulation sees them die as the real
// run does, so the counts still agree.
class InplaceChain final : public Workload {
 public:
  InplaceChain() {
    manual_seed(9);
    for (int i = 0; i < 12; ++i) {
      Tensor w;
      {
        NoGradGuard ng;
        w = randn({128, 128}) * 0.09;
      }
      w.requires_grad_();
      ws.push_back(w);
    }
    optim::SGDOptions o;
    o.lr(0.01);
    o.momentum(0.9);
    optimizer = std::make_unique<optim::SGD>(ws, o);
    x = data({1024, 128});
  }
  Tensor loss() override {
    Tensor h = x;
    for (const Tensor& w : ws) {
      h = matmul(h, w);
      h.mul_(0.5);
      h = gelu(h);
    }
    return (h * h).mean();
  }
  std::vector<Tensor> ws;
  Tensor x;
};

TEST(Planner, InPlaceWritesIntoActivationsCountsEqualARealBudgetedRun) {
  expect_prediction_matches([] { return std::make_unique<InplaceChain>(); }, {0.6, 0.45});
}

// The old version an in-place write leaves behind when the storage has
// lineage has no bytes, but is accounted from the start, so its
// destruction is seen (a recording names it; a simulation drops it then).
TEST(Planner, OldVersionsWithLineageAreAccounted) {
  remat::set_memory_budget(std::nullopt);
  const Tensor x = data({1024});
  const int64_t before = remat::stats().live_storages;
  {
    Tensor y = exp(x);
    EXPECT_EQ(remat::stats().live_storages, before + 1);
    y.mul_(2.0);  // y's old value: a storage with exp's lineage and no bytes
    EXPECT_EQ(remat::stats().live_storages, before + 2);
    EXPECT_FLOAT_EQ(y.to_vector<float>()[1], 2.0f * std::exp(std::sin(0.37f)));
  }
  EXPECT_EQ(remat::stats().live_storages, before);
}

}  // namespace
}  // namespace dtr
