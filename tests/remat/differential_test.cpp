// Random-program differential tester: random op DAGs with views, in-place
// ops, dropout, autocast, multi-output ops and backward, run unlimited and
// under shrinking budgets down to the smallest feasible one. Outputs and
// gradients must be bitwise equal and the peak must stay under the budget.
// DTR_DIFF_PROGRAMS sets the number of programs (default 1000; 100000 for a
// long soak).
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"

namespace dtr {
namespace {

struct Result {
  std::vector<std::vector<float>> values;
  int64_t peak = 0;
  int64_t rematerializations = 0;
  std::string trace;  // the program, for failure messages
};

// Runs program `seed`. The same seed always builds the same program, and the
// program's tensors and RNG draws do not depend on the budget.
Result run_program(uint64_t seed, std::optional<int64_t> budget) {
  std::mt19937_64 gen(seed);
  auto pick = [&](size_t n) { return size_t(gen() % n); };
  manual_seed(seed);
  const int64_t N = 8;
  Result r;
  std::vector<Tensor> leaves;
  for (int i = 0; i < 3; ++i) {
    Tensor t;
    {
      NoGradGuard ng;
      t = randn({N, N}) * 0.5;
    }
    t.requires_grad_();
    leaves.push_back(t);
  }
  remat::reset_stats();
  remat::set_memory_budget(budget);
  std::vector<Tensor> pool = leaves;
  const int ops = 12 + int(pick(12));
  for (int k = 0; k < ops; ++k) {
    const Tensor& a = pool[pick(pool.size())];
    const Tensor& b = pool[pick(pool.size())];
    Tensor out;
    switch (pick(14)) {
      case 0: out = relu(a); r.trace += "relu "; break;
      case 1: out = gelu(a, "tanh"); r.trace += "gelu "; break;
      case 2: out = tanh(a) * b; r.trace += "tanh*mul "; break;
      case 3: out = add(a, b, 0.5); r.trace += "add "; break;
      case 4: out = matmul(a, b) * 0.3; r.trace += "matmul "; break;
      case 5: out = a.transpose(0, 1) + b; r.trace += "transpose+add "; break;
      case 6: out = cat({a.narrow(0, 0, N / 2), b.narrow(0, N / 2, N / 2)}, 0); r.trace += "narrow+cat "; break;
      case 7: out = dropout(a, 0.3, true); r.trace += "dropout "; break;
      case 8: {
        AutocastGuard ac(kBFloat16);
        out = matmul(a, b).to(kFloat32);
        r.trace += "autocast-matmul ";
        break;
      }
      case 9: {
        auto [values, indices] = max(a, 1, /*keepdim=*/true);  // a multi-output op
        out = a - values;
        r.trace += "max-dim ";
        break;
      }
      case 10: out = softmax(a, -1) * b; r.trace += "softmax "; break;
      case 11: out = layer_norm(a, {N}); r.trace += "layer_norm "; break;
      case 12: {
        out = a * 1.0;  // a fresh non-leaf, then written in place
        out.add_(b);
        out.mul_(0.5);
        r.trace += "inplace ";
        break;
      }
      default: {
        std::vector<Tensor> parts = chunk(a, 2, 1);  // views as outputs
        out = cat({parts[1].sigmoid(), parts[0] * b.narrow(1, 0, N / 2)}, 1);
        r.trace += "chunk ";
        break;
      }
    }
    pool.push_back(out);
  }
  Tensor loss = zeros({});
  for (size_t i = leaves.size(); i < pool.size(); ++i) loss = loss + pool[i].mean();
  loss.backward();
  r.values.push_back(loss.to_vector<float>());
  for (size_t i = leaves.size(); i < pool.size(); ++i) r.values.push_back(pool[i].to_vector<float>());
  for (const Tensor& l : leaves) {
    // A leaf the program never used gets no gradient.
    r.values.push_back(l.grad().defined() ? l.grad().to_vector<float>() : std::vector<float>{});
  }
  r.peak = remat::stats().peak_bytes;
  r.rematerializations = remat::stats().rematerializations;
  remat::set_memory_budget(std::nullopt);
  return r;
}

bool same_bits(const Result& a, const Result& b) {
  if (a.values.size() != b.values.size()) return false;
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (a.values[i].size() != b.values[i].size()) return false;
    if (!a.values[i].empty() &&
        std::memcmp(a.values[i].data(), b.values[i].data(), a.values[i].size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

TEST(Differential, RandomProgramsAreBitwiseEqualUnderBudgets) {
  const char* env = std::getenv("DTR_DIFF_PROGRAMS");
  const int programs = env ? std::atoi(env) : 1000;
  int64_t total_remats = 0;
  for (int p = 0; p < programs; ++p) {
    const uint64_t seed = 1000 + uint64_t(p);
    const int64_t base = remat::stats().resident_bytes;
    const Result ref = run_program(seed, std::nullopt);
    const int64_t activations = ref.peak - base;
    // Shrink the budget until the program no longer fits.
    for (double fraction = 0.7; fraction > 0.02; fraction *= 0.6) {
      const int64_t budget = base + int64_t(double(activations) * fraction);
      Result got;
      try {
        got = run_program(seed, budget);
      } catch (const OutOfMemoryError&) {
        remat::set_memory_budget(std::nullopt);
        break;  // below the smallest feasible budget
      }
      ASSERT_TRUE(same_bits(ref, got)) << "program " << seed << " at budget fraction " << fraction
                                       << " differs; ops: " << ref.trace;
      ASSERT_LE(got.peak, budget) << "program " << seed << ": " << ref.trace;
      total_remats += got.rematerializations;
    }
  }
  EXPECT_GT(total_remats, programs);  // the budgets really made it rematerialize
}

}  // namespace
}  // namespace dtr
