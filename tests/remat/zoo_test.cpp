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
#include "second_device.h"

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
  BudgetScope(Device d, std::optional<int64_t> b) : device(d) { remat::set_memory_budget(d, b); }
  ~BudgetScope() { remat::set_memory_budget(device, std::nullopt); }
  Device device;
};

ZooRun train(const std::string& name, std::optional<int64_t> budget, zoo::Mode mode = zoo::Mode::kPlain,
             Device device = Device(kCPU)) {
  const auto workload = zoo::find_model(name).make(kSeed, device);
  ZooRun r;
  remat::reset_stats();
  {
    BudgetScope scope(device, budget);
    for (int step = 0; step < kSteps; ++step) r.losses.push_back(workload->step(mode));
    for (const Tensor& p : workload->model()->parameters()) r.params.push_back(p.to_vector<float>());
    r.stats = remat::stats(device);
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
// and 30%) of the unlimited peak: every one bitwise the first. Where the
// device's allocator rounds (the test device, as CUDA), the peak and the
// budget are the allocator's bytes, rounding included (Note [hard budget]).
void check_zoo_model(const std::string& name, std::vector<double> fractions = {0.5, 0.3},
                     Device device = Device(kCPU)) {
  const ZooRun ref = train(name, std::nullopt, zoo::Mode::kPlain, device);
  const bool rounds = ref.stats.allocated_bytes >= 0;
  for (size_t i = 1; i < ref.losses.size(); ++i) {
    EXPECT_LT(ref.losses[i], ref.losses[0]) << name << ": training does not lower the loss";
  }
  const int64_t peak = rounds ? ref.stats.peak_allocated_bytes : ref.stats.peak_bytes;
  ASSERT_GT(peak, 0);
  EXPECT_EQ(ref.stats.evictions, 0);
  expect_bitwise(ref, train(name, std::nullopt, zoo::Mode::kCheckpoint, device), name + " checkpoint");
  for (double fraction : fractions) {
    const auto budget = int64_t(double(peak) * fraction);
    const ZooRun r = train(name, budget, zoo::Mode::kPlain, device);
    const std::string what = name + " on " + device.str() + " at " + std::to_string(fraction) + " of the peak";
    expect_bitwise(ref, r, what);
    EXPECT_LE(r.stats.peak_bytes, budget) << what;
    if (rounds) EXPECT_LE(r.stats.peak_allocated_bytes, budget) << what << ", rounding included";
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

// The models gpu-check trains on cuda:0, on the test device: its caching
// allocator rounds every block to 512 bytes and carves them from segments,
// as CUDA's does, so the budget is met with the rounding counted.
TEST(ZooUnderBudgetOnTheTestDevice, Gpt) { check_zoo_model("gpt", {0.5}, testing::second_device()); }
TEST(ZooUnderBudgetOnTheTestDevice, ResNet) { check_zoo_model("resnet", {0.5}, testing::second_device()); }

}  // namespace
}  // namespace dtr
