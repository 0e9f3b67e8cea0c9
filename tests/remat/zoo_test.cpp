// Models of the zoo (benchmarks/models/) train under a memory budget to
// bitwise the losses and parameters of an unlimited run (Note [replay equals
// original]) while staying under the budget and rematerializing; static
// checkpointing (Mode::kCheckpoint) gives bitwise the plain numbers too.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "benchmarks/models/zoo.h"
#include "dtr/dtr.h"
#include "remat/storage_state.h"

namespace dtr {
namespace {

constexpr uint64_t kSeed = 7;
constexpr int kSteps = 3;

struct ZooRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;  // after the last step
  remat::Stats stats;
  bool inputs_resident_constants = false;  // after the last step
};

// Every fixed input is a constant (no lineage, never evicted) whose bytes are resident.
bool resident_constants(const zoo::Workload& w) {
  const std::vector<Tensor> inputs = w.inputs();
  if (inputs.empty()) return false;
  for (const Tensor& t : inputs) {
    if (!remat::is_constant(*t.storage()) || remat::producer(*t.storage()) != nullptr ||
        t.storage()->data() == nullptr) {
      return false;
    }
  }
  return true;
}

// Restores an unlimited budget however the run ends.
struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> b) { remat::set_memory_budget(b); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};

ZooRun train(const std::string& name, std::optional<int64_t> budget, zoo::Mode mode = zoo::Mode::kPlain) {
  const auto workload = zoo::find_model(name).make(kSeed);
  ZooRun r;
  remat::reset_stats();
  {
    BudgetScope scope(budget);
    for (int step = 0; step < kSteps; ++step) r.losses.push_back(workload->step(mode));
    for (const Tensor& p : workload->model()->parameters()) r.params.push_back(p.to_vector<float>());
    r.stats = remat::stats();
    r.inputs_resident_constants = resident_constants(*workload);
  }
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_bitwise(const ZooRun& ref, const ZooRun& got, const std::string& what) {
  ASSERT_EQ(ref.losses.size(), got.losses.size()) << what;
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&ref.losses[i], &got.losses[i], sizeof(double)), 0)
        << what << ": loss " << i << " " << ref.losses[i] << " vs " << got.losses[i];
  }
  ASSERT_EQ(ref.params.size(), got.params.size()) << what;
  for (size_t i = 0; i < ref.params.size(); ++i) {
    EXPECT_TRUE(same_bits(ref.params[i], got.params[i])) << what << ": parameter " << i;
  }
}

// Plain and checkpointed unlimited runs, then plain runs at fractions (50%
// and 30%) of the unlimited peak: every one bitwise the first.
void check_zoo_model(const std::string& name, std::vector<double> fractions = {0.5, 0.3}) {
  const ZooRun ref = train(name, std::nullopt);
  for (size_t i = 1; i < ref.losses.size(); ++i) {
    EXPECT_LT(ref.losses[i], ref.losses[0]) << name << ": training does not lower the loss";
  }
  const int64_t peak = ref.stats.peak_bytes;
  ASSERT_GT(peak, 0);
  EXPECT_EQ(ref.stats.evictions, 0);
  expect_bitwise(ref, train(name, std::nullopt, zoo::Mode::kCheckpoint), name + " checkpoint");
  for (double fraction : fractions) {
    const auto budget = int64_t(double(peak) * fraction);
    const ZooRun r = train(name, budget);
    const std::string what = name + " at " + std::to_string(fraction) + " of the peak";
    expect_bitwise(ref, r, what);
    EXPECT_LE(r.stats.peak_bytes, budget) << what;
    EXPECT_GT(r.stats.evictions, 0) << what;
    EXPECT_GT(r.stats.rematerializations, 0) << what;
    EXPECT_TRUE(r.inputs_resident_constants) << what << ": an input was evicted or has lineage";
  }
}

// Inputs and targets come from a loader (zoo::loaded): constants, as a real
// training loop's batches, for every model; a rank's shard of them too.
TEST(ZooInputs, AreLoadedConstants) {
  for (const zoo::ModelSpec& spec : zoo::models()) {
    const auto w = spec.make(kSeed);
    EXPECT_TRUE(resident_constants(*w)) << spec.name;
    if (spec.name == "gpt" || spec.name == "chain") {
      w->shard_batch(1, 2);
      EXPECT_TRUE(resident_constants(*w)) << spec.name << " shard";
    }
  }
  EXPECT_THROW(zoo::loaded(ones({2}, kFloat16), Device(kCPU)), TypeError);
}

// The fused attention rows hold no (B·H, T, T) scores, so the llama's peak
// is lower and 30% of it lies below what its deepest rematerialization locks.
TEST(ZooUnderBudget, Llama) { check_zoo_model("llama", {0.5, 0.4}); }
TEST(ZooUnderBudget, UNetGroupNorm) { check_zoo_model("unet_gn"); }
TEST(ZooUnderBudget, MixtureOfExperts) { check_zoo_model("moe"); }

}  // namespace
}  // namespace dtr
