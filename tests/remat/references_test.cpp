// REFERENCES.md "Failures others shipped", restated for dtr. "Reference" is
// the same program with no budget.
#include <atomic>
#include <cstring>
#include <optional>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "eager/lineage_record.h"
#include "tests/testing.h"

namespace dtr {
namespace {

struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> b) { remat::set_memory_budget(b); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};

Tensor leaf_param(IntList shape, double scale) {
  Tensor t;
  {
    NoGradGuard ng;
    t = randn(shape) * scale;
  }
  t.requires_grad_();
  return t;
}

// Case 1: dropout's mask survives eviction and rematerialization.
TEST(References, Case1DropoutMaskIsReplayed) {
  manual_seed(11);
  Tensor x = leaf_param({256, 64}, 1.0);
  Tensor y = dropout(x * 2.0, 0.5, true);
  const std::vector<float> first = y.to_vector<float>();
  {
    // Room for one more 64 KiB tensor: a 128 KiB one forces y out.
    BudgetScope b(remat::stats().resident_bytes + 256 * 64 * 4);
    Tensor filler = randn({512, 64});
    EXPECT_FALSE(y.storage()->resident());
    EXPECT_EQ(y.to_vector<float>(), first);  // rematerialized: same mask
  }
  y.sum().backward();
  const std::vector<float> g = x.grad().to_vector<float>();
  for (size_t i = 0; i < first.size(); ++i) {
    if (first[i] == 0.0f) {
      EXPECT_EQ(g[i], 0.0f) << i;
    }
    else EXPECT_EQ(g[i], 4.0f) << i;  // 2 * 1/(1-p)
  }
}

// Case 3: ten stacked Linear(10,10) under bf16 autocast; rematerialized
// activations are bf16 and bitwise the originals.
TEST(References, Case3AutocastRematerializesInBFloat16) {
  manual_seed(3);
  std::vector<Tensor> w;
  for (int i = 0; i < 10; ++i) w.push_back(leaf_param({10, 10}, 0.3));
  Tensor x = leaf_param({10, 10}, 1.0);
  std::vector<Tensor> acts;
  {
    NoGradGuard ng;  // no saved tensors: the activations are the only evictable storages
    AutocastGuard ac(kBFloat16);
    Tensor h = x;
    for (auto& wi : w) {
      h = linear(h, wi);
      acts.push_back(h);
    }
  }
  std::vector<std::vector<float>> before;
  for (auto& a : acts) {
    EXPECT_EQ(a.dtype(), kBFloat16);
    before.push_back(a.to_vector<float>());
  }
  BudgetScope b(remat::stats().resident_bytes + 400);
  Tensor filler = randn({200});  // 800 bytes: evicts activations
  int evicted = 0;
  for (auto& a : acts) evicted += a.storage()->resident() ? 0 : 1;
  EXPECT_GT(evicted, 0);
  for (size_t i = 0; i < acts.size(); ++i) {
    EXPECT_EQ(acts[i].dtype(), kBFloat16);
    EXPECT_EQ(acts[i].to_vector<float>(), before[i]) << i;
  }
}

// Case 4: autocast entered inside a region whose outputs are rematerialized
// outside any autocast scope: replay uses the recorded state.
TEST(References, Case4ReplayUsesRecordedAutocastState) {
  manual_seed(4);
  Tensor a = leaf_param({32, 32}, 1.0);
  Tensor w = leaf_param({32, 32}, 1.0);
  Tensor y;
  {
    NoGradGuard ng;  // no saved casts: y is the only evictable storage
    AutocastGuard ac(kFloat16);
    y = matmul(a, w);
  }
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_TRUE(lineage_of(y)->state.autocast[kCPU].enabled);
  const auto before = y.to_vector<float>();
  BudgetScope b(remat::stats().resident_bytes + 4096);
  Tensor filler = randn({32, 48});  // 6 KiB: y (2 KiB) must go
  EXPECT_FALSE(y.storage()->resident());
  EXPECT_EQ(y.to_vector<float>(), before);
}

// Case 5: BatchNorm1d(10, momentum=0.001) -> Linear(10,1), 1000 steps under a
// budget: running statistics identical to the reference.
TEST(References, Case5BatchNormRunningStatsUpdatedOncePerForward) {
  int64_t remats = 0;
  auto run = [&](std::optional<int64_t> extra) {
    manual_seed(5);
    Tensor w = leaf_param({1, 10}, 0.3);
    Tensor rm = zeros({10}), rv = ones({10});
    const int64_t base = remat::stats().resident_bytes;
    BudgetScope b(extra ? std::optional<int64_t>(base + *extra) : std::nullopt);
    remat::reset_stats();
    for (int step = 0; step < 1000; ++step) {
      Tensor x = randn({256, 10});
      Tensor out = linear(batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.001, 1e-5), w);
      // Something else wants the memory before backward: the batch-norm
      // output (saved for the weight gradient) is evicted and replayed.
      Tensor other = randn({512, 10});
      w.set_grad(Tensor());
      out.pow(2).mean().backward();
      NoGradGuard ng;
      w.sub_(w.grad() * 0.01);
    }
    remats = remat::stats().rematerializations;
    return std::make_pair(rm.to_vector<float>(), rv.to_vector<float>());
  };
  const auto ref = run(std::nullopt);
  const auto tight = run(30000);
  EXPECT_GT(remats, 0);
  EXPECT_EQ(ref.first, tight.first);
  EXPECT_EQ(ref.second, tight.second);
  EXPECT_GT(std::abs(ref.first[0]), 0.0f);
}

// A test-only op: out = in, and a counter bumps each time the kernel runs.
std::atomic<int> g_side_effects{0};
std::atomic<int> g_collectives{0};

void count_side_effect(const KernelContext& c) {
  ++g_side_effects;
  std::memcpy(c.outputs[0].data, c.inputs[0].data, size_t(c.inputs[0].numel() * 4));
}
void count_collective(const KernelContext& c) {
  ++g_collectives;
  std::memcpy(c.outputs[0].data, c.inputs[0].data, size_t(c.inputs[0].numel() * 4));
}
void infer_same(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  TensorMeta m = in[0];
  m.strides = contiguous_strides(m.shape);
  m.offset = 0;
  out.push_back(m);
}
std::vector<Tensor> identity_backward(const BackwardContext&, std::span<const Tensor> g) {
  return {g[0]};
}

const OpDef& test_op(const char* name, bool collective) {
  ensure_ops_registered();
  if (const OpDef* d = OpRegistry::instance().find(name)) return *d;
  OpDef d{.name = name, .infer = infer_same, .backward = identity_backward};
  d.save = kSaveNone;
  if (collective) d.flags.collective = true;
  else d.flags.side_effect = true;
  OpRegistry::instance().define(std::move(d));
  OpRegistry::instance().set_kernel(name, kCPU, collective ? count_collective : count_side_effect);
  return OpRegistry::instance().get(name);
}

// Cases 6 and 7: a side-effecting op (a counter standing in for a cache
// append) and a collective (a counting fake all-reduce) inside evictable
// lineage are never replayed.
TEST(References, Case6And7SideEffectsAndCollectivesAreNeverReplayed) {
  const OpDef& side = test_op("test_counting_side_effect", false);
  const OpDef& coll = test_op("test_fake_all_reduce", true);
  manual_seed(6);
  Tensor w = leaf_param({64, 64}, 0.1);
  g_side_effects = 0;
  g_collectives = 0;
  const int steps = 4;
  int64_t remats = 0;
  {
    BudgetScope b(std::nullopt);
    remat::reset_stats();
    for (int s = 0; s < steps; ++s) {
      Tensor x = randn({512, 64});
      Tensor h = relu(matmul(x, w));
      // The counted ops see a small summary, so their pinned outputs stay small.
      h = h + dispatch1(side, {h.mean({0})});
      h = relu(matmul(h, w));
      h = h * dispatch1(coll, {h.mean({0})});
      h = relu(matmul(h, w));
      h = relu(matmul(h, w));
      if (s == 0) remat::set_memory_budget(remat::stats().peak_bytes * 3 / 5);
      w.set_grad(Tensor());
      h.sum().backward();
    }
    remats = remat::stats().rematerializations;
  }
  EXPECT_GT(remats, 0);
  EXPECT_EQ(g_side_effects.load(), steps);
  EXPECT_EQ(g_collectives.load(), steps);
}

// Case 8: 8 x Linear(256,256) on a 137x256 input: the budgeted peak is lower.
TEST(References, Case8BudgetLowersThePeak) {
  auto run = [](std::optional<int64_t> budget) {
    manual_seed(8);
    std::vector<Tensor> w;
    for (int i = 0; i < 8; ++i) w.push_back(leaf_param({256, 256}, 0.06));
    Tensor x = randn({137, 256});
    remat::reset_stats();
    BudgetScope b(budget);
    Tensor h = x;
    for (auto& wi : w) h = linear(h, wi);
    h.sum().backward();
    return std::make_pair(remat::stats().peak_bytes, w[0].grad().to_vector<float>());
  };
  const auto ref = run(std::nullopt);
  // Weights and their grads: a leaf's .grad is a constant kept until the
  // optimizer reads it, so the peak comes at the end of backward, with all
  // eight grads and the last weight gradient's inputs and output (about
  // 0.6 of the rest) resident.
  const int64_t params = 8 * 256 * 256 * 4 * 2;
  const auto tight = run(params + (ref.first - params) * 3 / 4);
  EXPECT_LT(tight.first, ref.first);
  EXPECT_EQ(tight.second, ref.second);
}

// Case 9: a budget far below what the model needs: OutOfMemoryError naming
// the budget, never a silent overshoot; the process goes on.
TEST(References, Case9BudgetTooSmallIsAClearError) {
  manual_seed(9);
  Tensor w = leaf_param({512, 512}, 0.05);
  BudgetScope b(remat::stats().resident_bytes + 1024);
  try {
    Tensor h = linear(randn({512, 512}), w);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos);
  }
  EXPECT_LE(remat::stats().resident_bytes, *remat::memory_budget());
  remat::set_memory_budget(std::nullopt);
  EXPECT_EQ(linear(ones({1, 512}), w).shape(), (Shape{1, 512}));
}

// Case 10: free bytes scattered over many small storages still satisfy one
// large request (the budget counts bytes; eviction frees as many as needed).
TEST(References, Case10ScatteredFreeBytesStillServeALargeRequest) {
  manual_seed(10);
  std::vector<Tensor> small;
  for (int i = 0; i < 32; ++i) small.push_back(randn({256}));
  BudgetScope b(remat::stats().resident_bytes);
  remat::reset_stats();
  Tensor big = randn({32 * 256});  // needs the room of all 32 small ones
  EXPECT_EQ(big.numel(), 32 * 256);
  EXPECT_LE(remat::stats().peak_bytes, *remat::memory_budget());
}

// Case 11: an optimizer step mutates parameters while activations computed
// from the old values are evicted and still referenced.
TEST(References, Case11OptimizerStepDoesNotLeakIntoOldActivations) {
  manual_seed(12);
  Tensor w = leaf_param({64, 64}, 0.1);
  Tensor x = leaf_param({64, 64}, 1.0);
  Tensor h = relu(matmul(x, w));
  const auto before = h.to_vector<float>();
  BudgetScope b(remat::stats().resident_bytes + 2 * 64 * 64 * 4);
  Tensor filler = randn({192, 64});  // 48 KiB: h (16 KiB) must go
  EXPECT_FALSE(h.storage()->resident());
  {
    NoGradGuard ng;
    w.add_(1.0);  // the step, while h is evicted and still referenced
  }
  EXPECT_EQ(h.to_vector<float>(), before);  // old parameters, not new ones
  // A resident reader is detached instead: it keeps its value.
  Tensor h2 = relu(matmul(x, w));
  const auto before2 = h2.to_vector<float>();
  {
    NoGradGuard ng;
    w.add_(1.0);
  }
  EXPECT_EQ(h2.to_vector<float>(), before2);
}

// Case 11, continued: a storage no user holds but that a replay brought
// back (the sibling output of a multi-output op rebuilt for another tensor)
// is freed, not turned into a constant, when the parameter it was computed
// from changes.
TEST(References, Case11OptimizerStepFreesUnheldIntermediates) {
  manual_seed(14);
  Tensor w = leaf_param({64, 64}, 0.1);
  Tensor x = leaf_param({256, 64}, 1.0);
  Tensor a, c;
  std::weak_ptr<Storage> kept;
  {
    NoGradGuard ng;
    auto [values, indices] = max(matmul(x, w), 1);  // one op, two outputs
    a = relu(values);
    c = indices.to(kFloat32);
    kept = indices.storage();
  }  // the matmul result, values and indices have no handle left: freed
  const auto a_before = a.to_vector<float>();
  const auto c_before = c.to_vector<float>();
  {
    // Room for nothing more: a 1 KiB filler evicts one 1 KiB storage, and
    // a (used before c) is the stalest.
    BudgetScope b(remat::stats().resident_bytes);
    Tensor filler = randn({256});
    EXPECT_FALSE(a.storage()->resident());
    EXPECT_TRUE(c.storage()->resident());
  }
  // a's replay rebuilds max: values (freed again once relu is done) and
  // indices, which nothing uses now and no user holds, but stays resident.
  EXPECT_EQ(a.to_vector<float>(), a_before);
  const int64_t with_indices = remat::stats().resident_bytes;
  ASSERT_FALSE(kept.expired());
  EXPECT_TRUE(kept.lock()->resident());
  EXPECT_EQ(kept.lock()->handle_count.load(), 0);
  {
    NoGradGuard ng;
    w.add_(1.0);
  }
  // The indices' 2 KiB are gone; a and c keep their old values as constants.
  EXPECT_EQ(remat::stats().resident_bytes, with_indices - 256 * 8);
  EXPECT_EQ(a.to_vector<float>(), a_before);
  EXPECT_EQ(c.to_vector<float>(), c_before);
  EXPECT_EQ(remat::producer(*a.storage()), nullptr);
  EXPECT_EQ(remat::producer(*c.storage()), nullptr);
}

// Case 12: Linear(4,3) on an input that does not require grad: parameters
// still get the reference gradients under any budget.
TEST(References, Case12ParametersGetGradientsWithoutInputGrad) {
  auto run = [](std::optional<int64_t> budget) {
    manual_seed(13);
    Tensor w = leaf_param({3, 4}, 0.5), bias = leaf_param({3}, 0.5);
    Tensor x = randn({5, 4});
    BudgetScope b(budget);
    linear(x, w, bias).pow(2).sum().backward();
    return std::make_pair(w.grad().to_vector<float>(), bias.grad().to_vector<float>());
  };
  const auto ref = run(std::nullopt);
  const auto tight = run(remat::stats().resident_bytes + 400);
  EXPECT_EQ(ref, tight);
  EXPECT_EQ(ref.first.size(), 12u);
}

}  // namespace
}  // namespace dtr
