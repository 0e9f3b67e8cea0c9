// Training under a memory budget gives bitwise the numbers of an unlimited
// run (Note [replay equals original]), stays under the budget (Note [hard
// budget]) and actually rematerializes. Models are written with the
// functional API so the test depends only on ops and autograd.
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

struct Run {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;  // after training
  std::vector<std::vector<float>> grads;   // of the last step
  remat::Stats stats;
};

struct Model {
  std::vector<Tensor> params;
  // Returns the loss of one batch (step index selects the batch).
  std::function<Tensor(const std::vector<Tensor>&, int step)> loss;
  std::function<std::vector<Tensor>()> init;
};

// Restores an unlimited budget however the test ends.
struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> b) { remat::set_memory_budget(b); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};

Run train(const Model& m, int steps, std::optional<int64_t> budget) {
  manual_seed(1234);
  std::vector<Tensor> params = m.init();
  Run r;
  remat::reset_stats();
  BudgetScope scope(budget);
  for (int step = 0; step < steps; ++step) {
    for (auto& p : params) p.set_grad(Tensor());
    Tensor loss = m.loss(params, step);
    r.losses.push_back(loss.item<float>());
    loss.backward();
    NoGradGuard ng;
    for (auto& p : params) p.sub_(p.grad() * 0.05);  // SGD, in place (Note [mutation])
  }
  for (auto& p : params) {
    r.params.push_back(p.to_vector<float>());
    r.grads.push_back(p.grad().to_vector<float>());
  }
  r.stats = remat::stats();
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_bitwise(const Run& ref, const Run& got, const std::string& what) {
  ASSERT_EQ(ref.losses.size(), got.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_TRUE(same_bits({ref.losses[i]}, {got.losses[i]}))
        << what << ": loss " << i << " " << ref.losses[i] << " vs " << got.losses[i];
  for (size_t i = 0; i < ref.params.size(); ++i) {
    EXPECT_TRUE(same_bits(ref.params[i], got.params[i])) << what << ": parameter " << i;
    EXPECT_TRUE(same_bits(ref.grads[i], got.grads[i])) << what << ": gradient " << i;
  }
}

// Deterministic data: a constant loaded from outside (never evicted).
Tensor data(IntList shape, int step, double freq = 0.37) {
  std::vector<float> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i) * freq + step));
  return from_vector(v, shape);
}

Tensor targets(int64_t n, int64_t classes, int step) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 7 + size_t(step) * 3) % size_t(classes));
  return from_vector(v, {n});
}

Tensor param(IntList shape, double scale) {
  Tensor t;
  {
    NoGradGuard ng;
    t = randn(shape) * scale;
  }
  t.requires_grad_();
  return t;
}

// Trains at 100%, 50%, 30% of the unbudgeted peak and at the smallest budget
// (found by shrinking) that works; all bitwise equal to the unlimited run.
void check_model(const Model& m, int steps) {
  const Run ref = train(m, steps, std::nullopt);
  const int64_t peak = ref.stats.peak_bytes;
  ASSERT_GT(peak, 0);
  for (double fraction : {1.0, 0.5, 0.3}) {
    const auto budget = int64_t(double(peak) * fraction);
    const Run r = train(m, steps, budget);
    expect_bitwise(ref, r, "budget fraction " + std::to_string(fraction));
    EXPECT_LE(r.stats.peak_bytes, budget);
    if (fraction < 1.0) {
      EXPECT_GT(r.stats.evictions, 0) << fraction;
      EXPECT_GT(r.stats.rematerializations, 0) << fraction;
      // Replayed ops carry the registry's FLOP estimate (every model here
      // replays at least one matmul or convolution).
      EXPECT_GT(r.stats.recomputed_flops, 0) << fraction;
      EXPECT_GE(r.stats.recomputed_ops, 1) << fraction;
    }
  }
  // The smallest feasible budget: shrink until OutOfMemoryError.
  double lo = 0.3;
  std::optional<Run> smallest;
  for (double fraction = 0.25; fraction > 0.04; fraction *= 0.75) {
    try {
      smallest = train(m, steps, int64_t(double(peak) * fraction));
      lo = fraction;
    } catch (const OutOfMemoryError&) {
      break;
    }
  }
  if (smallest) {
    expect_bitwise(ref, *smallest, "smallest feasible budget " + std::to_string(lo));
    EXPECT_LE(smallest->stats.peak_bytes, int64_t(double(peak) * lo));
    EXPECT_GT(smallest->stats.rematerializations, 0);
  }
}

// 24 hidden layers: activations, not parameters, dominate the peak, so
// 30% of it is feasible.
TEST(TrainingUnderBudget, Mlp) {
  Model m;
  m.init = [] {
    std::vector<Tensor> p{param({64, 32}, 0.2)};
    for (int i = 0; i < 23; ++i) p.push_back(param({64, 64}, 0.12));
    p.push_back(param({10, 64}, 0.1));
    return p;
  };
  m.loss = [](const std::vector<Tensor>& p, int step) {
    Tensor h = data({1024, 32}, step);
    for (size_t i = 0; i + 1 < p.size(); ++i) h = gelu(linear(h, p[i]));
    return cross_entropy(linear(h, p.back()), targets(1024, 10, step));
  };
  check_model(m, 5);
}

// Note [what may be evicted]: lineage is pruned as tensors die, so host
// metadata does not grow over training steps.
TEST(TrainingUnderBudget, MetadataStaysFlatOverAThousandSteps) {
  manual_seed(2);
  Tensor w1 = param({32, 16}, 0.2), w2 = param({4, 32}, 0.2);
  remat::set_memory_budget(std::nullopt);
  int64_t nodes_at_10 = 0, storages_at_10 = 0;
  for (int step = 0; step < 1000; ++step) {
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    Tensor loss = cross_entropy(linear(relu(linear(data({8, 16}, step), w1)), w2), targets(8, 4, step));
    loss.backward();
    {
      NoGradGuard ng;
      w1.sub_(w1.grad() * 0.01);
      w2.sub_(w2.grad() * 0.01);
    }
    if (step == 10) {
      nodes_at_10 = remat::stats().metadata_nodes;
      storages_at_10 = remat::stats().live_storages;
    }
  }
  EXPECT_LE(remat::stats().metadata_nodes, nodes_at_10);
  EXPECT_LE(remat::stats().live_storages, storages_at_10);
}

// A two-block pre-norm transformer with residual dropout: replay must reuse
// the recorded Philox (seed, offset) for every mask.
TEST(TrainingUnderBudget, TransformerWithDropout) {
  constexpr int64_t B = 16, T = 32, C = 32, H = 4, V = 20;
  Model m;
  m.init = [] {
    std::vector<Tensor> p{param({V, C}, 0.3)};  // token embedding
    for (int blk = 0; blk < 4; ++blk) {
      p.push_back(param({C}, 0.0) + 1.0);  // ln1 weight (non-leaf fixed below)
      p.push_back(param({3 * C, C}, 0.15));
      p.push_back(param({C, C}, 0.15));
      p.push_back(param({4 * C, C}, 0.15));
      p.push_back(param({C, 4 * C}, 0.1));
    }
    p.push_back(param({V, C}, 0.2));  // head
    for (auto& t : p) {
      if (!t.is_leaf()) {
        NoGradGuard ng;
        t = t.detach();
        t.requires_grad_();
      }
    }
    return p;
  };
  m.loss = [](const std::vector<Tensor>& p, int step) {
    std::vector<int64_t> ids(size_t(B * T)), next(size_t(B * T));
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = int64_t((i * 5 + size_t(step)) % V);
      next[i] = int64_t((i * 5 + size_t(step) + 5) % V);
    }
    Tensor x = embedding(p[0], from_vector(ids, {B, T}));
    size_t k = 1;
    for (int blk = 0; blk < 4; ++blk) {
      Tensor h = layer_norm(x, {C}, p[k]);
      Tensor qkv = linear(h, p[k + 1]);
      std::vector<Tensor> parts = chunk(qkv, 3, -1);
      auto heads = [](const Tensor& t) { return t.view({B, T, H, C / H}).transpose(1, 2); };
      Tensor a = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                              Tensor(), 0.0, /*is_causal=*/true);
      a = a.transpose(1, 2).contiguous().view({B, T, C});
      x = x + dropout(linear(a, p[k + 2]), 0.1, true);
      Tensor f = gelu(linear(layer_norm(x, {C}, p[k]), p[k + 3]));
      x = x + dropout(linear(f, p[k + 4]), 0.1, true);
      k += 5;
    }
    Tensor logits = linear(x, p[k]);
    return cross_entropy(logits.view({B * T, V}), from_vector(next, {B * T}));
  };
  check_model(m, 5);
}

// A small CNN with batch norm: running statistics are a side effect applied
// once per forward and never replayed.
TEST(TrainingUnderBudget, CnnWithBatchNorm) {
  Model m;
  m.init = [] {
    std::vector<Tensor> p{param({8, 1, 3, 3}, 0.3), param({8}, 0.1)};
    for (int i = 0; i < 8; ++i) p.push_back(param({8, 8, 3, 3}, 0.1));
    p.push_back(param({10, 8}, 0.2));
    return p;
  };
  // Running statistics live outside the parameters (buffers).
  auto running_mean = std::make_shared<Tensor>();
  auto running_var = std::make_shared<Tensor>();
  m.loss = [running_mean, running_var](const std::vector<Tensor>& p, int step) {
    if (step == 0) {
      *running_mean = zeros({8});
      *running_var = ones({8});
    }
    Tensor x = data({8, 1, 16, 16}, step, 0.21);
    Tensor h = relu(conv2d(x, p[0], p[1], {1, 1}, {1, 1}));
    h = batch_norm(h, *running_mean, *running_var, Tensor(), Tensor(), true, 0.1, 1e-5);
    for (size_t i = 2; i < 9; ++i) h = relu(conv2d(h, p[i], Tensor(), {1, 1}, {1, 1})) + h;
    h = max_pool2d(relu(conv2d(h, p[9], Tensor(), {1, 1}, {1, 1})), {2, 2});
    h = adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    return cross_entropy(linear(h, p[10]), targets(8, 10, step));
  };
  check_model(m, 5);
}

}  // namespace
}  // namespace dtr
