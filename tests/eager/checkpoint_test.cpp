// dtr::checkpoint and checkpoint_sequential (torch.utils.checkpoint, reentrant):
// training with checkpointed regions gives bitwise the losses and gradients of
// training without them (dropout and autocast included), under a memory budget
// too; a checkpointed region holds less memory; errors are typed.
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "eager/dispatch_state.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using testing::bitwise_equal;
using UnaryFn = std::function<Tensor(const Tensor&)>;

// Restores an unlimited budget however the test ends.
struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> b) { remat::set_memory_budget(b); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};

constexpr int64_t kBatch = 32, kWidth = 48, kOut = 8;

// `blocks` x (Linear(W, W), GELU, Dropout(0.1)), then Linear(W, kOut).
nn::Sequential make_mlp(int blocks) {
  auto m = nn::Sequential();
  for (int i = 0; i < blocks; ++i) {
    m->push_back(nn::Linear(kWidth, kWidth));
    m->push_back(nn::GELU());
    m->push_back(nn::Dropout(0.1));
  }
  m->push_back(nn::Linear(kWidth, kOut));
  return m;
}

std::vector<UnaryFn> layer_functions(const nn::SequentialImpl& m) {
  std::vector<UnaryFn> fns;
  for (size_t i = 0; i < m.size(); ++i) {
    std::shared_ptr<nn::UnaryModule> layer = m.ptr<nn::UnaryModule>(i);
    fns.emplace_back([layer](const Tensor& x) { return layer->forward(x); });
  }
  return fns;
}

// Host copies, so that runs kept for comparison hold no device memory.
struct TrainingRun {
  std::vector<std::vector<float>> losses;
  std::vector<std::vector<std::vector<float>>> grads;  // per step, per parameter
  std::vector<std::vector<float>> params;              // after training
  int64_t peak_bytes = 0;
  int64_t evictions = 0;
};

using Forward = std::function<Tensor(nn::SequentialImpl&, const Tensor&)>;

// Three SGD steps of the MLP on one fixed batch, everything from one seed.
TrainingRun train(const Forward& forward, int blocks = 4, std::optional<int64_t> budget = std::nullopt,
                  int64_t batch = kBatch) {
  manual_seed(2024);
  auto model = make_mlp(blocks);
  const Tensor x = randn({batch, kWidth});
  const Tensor target = randn({batch, kOut});
  std::vector<Tensor> params = model->parameters();
  TrainingRun r;
  remat::reset_stats();
  {
    BudgetScope scope(budget);
    for (int step = 0; step < 3; ++step) {
      for (auto& p : params) p.set_grad(Tensor());
      Tensor loss = mse_loss(forward(*model, x), target);
      loss.backward();
      r.losses.push_back(loss.to_vector<float>());
      std::vector<std::vector<float>> grads;
      for (auto& p : params) {
        EXPECT_TRUE(p.grad().defined()) << "step " << step;
        grads.push_back(p.grad().defined() ? p.grad().to_vector<float>() : std::vector<float>());
      }
      r.grads.push_back(grads);
      NoGradGuard ng;
      for (auto& p : params) p.sub_(p.grad() * 0.1);
    }
    const remat::Stats s = remat::stats();
    r.peak_bytes = s.peak_bytes;
    r.evictions = s.evictions;
  }
  for (auto& p : params) r.params.push_back(p.to_vector<float>());
  return r;
}

::testing::AssertionResult same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " elements";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

void expect_same_run(const TrainingRun& got, const TrainingRun& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_TRUE(same_bits(got.losses[s], want.losses[s])) << "loss of step " << s;
    ASSERT_EQ(got.grads[s].size(), want.grads[s].size());
    for (size_t p = 0; p < want.grads[s].size(); ++p)
      EXPECT_TRUE(same_bits(got.grads[s][p], want.grads[s][p])) << "grad of step " << s << " parameter " << p;
  }
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t p = 0; p < want.params.size(); ++p)
    EXPECT_TRUE(same_bits(got.params[p], want.params[p])) << "parameter " << p;
}

Tensor plain_forward(nn::SequentialImpl& m, const Tensor& x) { return m.forward(x); }

Forward sequential_forward(int64_t segments) {
  return [segments](nn::SequentialImpl& m, const Tensor& x) {
    return checkpoint_sequential(layer_functions(m), segments, x);
  };
}

TEST(Checkpoint, MlpTrainingIsBitwiseThatWithoutCheckpoint) {
  const TrainingRun plain = train(plain_forward);
  // Each block in its own region; the input of the first does not require
  // grad, yet that region's parameters get their gradients.
  const TrainingRun per_block = train([](nn::SequentialImpl& m, const Tensor& x) {
    Tensor h = x;
    for (size_t i = 0; i + 1 < m.size(); i += 3) {
      h = checkpoint(
          [&m, i](const Tensor& in) { return m.ptr<nn::UnaryModule>(i + 2)->forward(m.ptr<nn::UnaryModule>(i + 1)->forward(m.ptr<nn::UnaryModule>(i)->forward(in))); },
          h);
      EXPECT_EQ(h.grad_fn_name(), "CheckpointFunctionBackward");
    }
    return m.ptr<nn::UnaryModule>(m.size() - 1)->forward(h);
  });
  expect_same_run(per_block, plain);
}

TEST(Checkpoint, DropoutIsActiveInTheRegion) {
  // Without replaying the RNG state the masks of the recomputation would differ
  // and the MLP test above would fail; check that the masks are really random.
  manual_seed(5);
  Tensor x = ones({4, 64}).requires_grad_();
  Tensor y = checkpoint([](const Tensor& in) { return dropout(in * 2.0, 0.5); }, x);
  const std::vector<float> v = y.to_vector<float>();
  int zeros_seen = 0;
  for (float e : v) zeros_seen += e == 0.0f;
  EXPECT_GT(zeros_seen, 0);
  EXPECT_LT(zeros_seen, int(v.size()));
  const RngState before = get_rng_state();
  sum(y).backward();
  // The recomputation does not advance the generator (torch.random.fork_rng).
  EXPECT_EQ(get_rng_state().offset, before.offset);
  EXPECT_EQ(get_rng_state().seed, before.seed);
  // Gradient 4 (2 * 1/(1-p)) exactly where the forward kept the element.
  const std::vector<float> g = x.grad().to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(g[i], v[i] == 0.0f ? 0.0f : 4.0f) << i;
}

TEST(Checkpoint, SequentialSegmentsAreBitwiseThatWithoutCheckpoint) {
  const int blocks = 5;  // 16 functions
  const TrainingRun plain = train(plain_forward, blocks);
  const int64_t n = 3 * blocks + 1;
  for (int64_t segments : {int64_t(1), int64_t(2), int64_t(std::lround(std::sqrt(double(n)))), n}) {
    SCOPED_TRACE("segments " + std::to_string(segments));
    expect_same_run(train(sequential_forward(segments), blocks), plain);
  }
  // The nn::Sequential overload splits the same way.
  expect_same_run(train([](nn::SequentialImpl& m, const Tensor& x) { return checkpoint_sequential(m, 4, x); },
                        blocks),
                  plain);
}

TEST(Checkpoint, SequentialLastSegmentIsNotCheckpointed) {
  manual_seed(1);
  Tensor x = randn({2, 3}).requires_grad_();
  std::vector<UnaryFn> fns(5, [](const Tensor& t) { return tanh(t); });
  // 5 functions, 2 segments: [0, 2) checkpointed, [2, 5) recorded normally.
  EXPECT_EQ(checkpoint_sequential(fns, 2, x).grad_fn_name(), "TanhBackward");
  EXPECT_EQ(checkpoint_sequential(fns, 1, x).grad_fn_name(), "TanhBackward");
  // 5 functions, 5 segments: four regions of one, then the last function.
  Tensor y = checkpoint_sequential(fns, 5, x);
  EXPECT_EQ(y.grad_fn_name(), "TanhBackward");
  EXPECT_EQ(y.grad_fn()->next[0].node->name(), "CheckpointFunctionBackward");
}

TEST(Checkpoint, SequentialHoldsLessMemory) {
  // Activations dominate: a long narrow chain on a large batch.
  auto peak_of = [](const Forward& forward) {
    manual_seed(3);
    auto model = make_mlp(12);
    const Tensor x = randn({512, kWidth});
    remat::reset_stats();
    Tensor loss = sum(forward(*model, x));
    loss.backward();
    return remat::stats().peak_bytes;
  };
  const int64_t plain = peak_of(plain_forward);
  const int64_t sqrt_n = peak_of(sequential_forward(6));
  EXPECT_LT(sqrt_n, plain * 2 / 3) << "plain " << plain << ", checkpointed " << sqrt_n;
}

TEST(Checkpoint, MultipleInputsAndOutputs) {
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor h = gelu(matmul(in[0], in[1]) + in[2]);
    return std::vector<Tensor>{h * in[2], dropout(tanh(h), 0.3), sum(in[0], {0})};
  };
  auto run = [&](bool use_checkpoint) {
    manual_seed(11);
    Tensor a = randn({3, 4}).requires_grad_();
    Tensor b = randn({4, 5}).requires_grad_();
    Tensor c = randn({3, 5});  // does not require grad
    // A non-leaf input: its gradient must flow on to `a`.
    Tensor a2 = a * 1.5;
    std::vector<Tensor> in{a2, b, c};
    std::vector<Tensor> out = use_checkpoint ? checkpoint(fn, in) : fn(in);
    EXPECT_EQ(out.size(), 3u);
    if (use_checkpoint) {
      for (const Tensor& o : out) EXPECT_EQ(o.grad_fn_name(), "CheckpointFunctionBackward");
    }
    // The third output takes no part in the loss: its gradient is zeros.
    Tensor loss = sum(out[0]) + sum(out[1] * out[1]);
    loss.backward();
    EXPECT_FALSE(c.grad().defined());
    return std::vector<Tensor>{out[0].detach(), out[1].detach(), out[2].detach(), loss.detach(),
                               a.grad(), b.grad()};
  };
  const auto want = run(false);
  const auto got = run(true);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(bitwise_equal(got[i], want[i])) << i;
}

TEST(Checkpoint, OutputThatIsAnInputKeepsTheInputIntact) {
  Tensor a = randn({3}).requires_grad_();
  Tensor b = randn({3}).requires_grad_();
  std::vector<Tensor> out =
      checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0], in[0] * in[1]}; },
                 {a, b});
  EXPECT_TRUE(a.is_leaf());
  EXPECT_EQ(out[0].grad_fn_name(), "CheckpointFunctionBackward");
  (sum(out[0]) + sum(out[1])).backward();
  const auto ga = a.grad().to_vector<float>(), bv = b.to_vector<float>();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(ga[i], 1.0f + bv[i]);
  EXPECT_TRUE(bitwise_equal(b.grad(), a.detach()));
}

TEST(Checkpoint, NestedRegions) {
  auto block = [](const nn::SequentialImpl& m, size_t i, bool inner_checkpoint) {
    return [&m, i, inner_checkpoint](const Tensor& x) {
      Tensor h = m.ptr<nn::UnaryModule>(i)->forward(x);
      UnaryFn act = [&m, i](const Tensor& t) { return m.ptr<nn::UnaryModule>(i + 2)->forward(m.ptr<nn::UnaryModule>(i + 1)->forward(t)); };
      return inner_checkpoint ? checkpoint(act, h) : act(h);
    };
  };
  const TrainingRun plain = train(plain_forward);
  const TrainingRun nested = train([&](nn::SequentialImpl& m, const Tensor& x) {
    // Outer regions of two blocks, each block's activation+dropout its own inner region.
    Tensor h = x;
    for (size_t i = 0; i + 1 < m.size(); i += 6) {
      UnaryFn first = block(m, i, true), second = block(m, i + 3, true);
      h = checkpoint([first, second](const Tensor& t) { return second(first(t)); }, h);
    }
    return m.ptr<nn::UnaryModule>(m.size() - 1)->forward(h);
  });
  expect_same_run(nested, plain);
}

TEST(Checkpoint, UnderASmallBudget) {
  // A large batch, so that activations rather than parameters fill the budget.
  const int blocks = 6;
  const int64_t batch = 256;
  const TrainingRun plain = train(plain_forward, blocks, std::nullopt, batch);
  const Forward forward = sequential_forward(4);
  const TrainingRun unbudgeted = train(forward, blocks, std::nullopt, batch);
  const int64_t budget = unbudgeted.peak_bytes * 3 / 4;
  const TrainingRun budgeted = train(forward, blocks, budget, batch);
  EXPECT_LT(unbudgeted.peak_bytes, plain.peak_bytes);
  expect_same_run(budgeted, plain);
  EXPECT_LE(budgeted.peak_bytes, budget);
  EXPECT_GT(budgeted.evictions, 0);
}

TEST(Checkpoint, AutocastStateOfTheForwardIsReplayed) {
  // The region runs under bf16 autocast; backward runs outside any autocast
  // scope, so the recomputation must restore the recorded state.
  auto run = [](bool use_checkpoint) {
    manual_seed(9);
    Tensor w = randn({6, 6}).requires_grad_();
    Tensor x = randn({4, 6});
    UnaryFn fn = [&w](const Tensor& t) { return gelu(matmul(t, w)); };
    Tensor y;
    {
      AutocastGuard ac(kBFloat16);
      y = use_checkpoint ? checkpoint(fn, x) : fn(x);
    }
    EXPECT_EQ(y.dtype(), kBFloat16);
    sum(y.to(kFloat32)).backward();
    return std::vector<Tensor>{y.detach(), w.grad()};
  };
  const auto want = run(false);
  const auto got = run(true);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(bitwise_equal(got[i], want[i])) << i;
}

TEST(Checkpoint, RecomputationRunsUnderTheForwardsStateWhateverTheCallers) {
  // Forward outside autocast; backward inside a bf16 autocast scope, with the
  // generator moved on: the recomputation sees the forward's RNG state and
  // dispatch state (grad mode on), and the caller's are back afterwards.
  manual_seed(12);
  Tensor x = randn({4, 6}).requires_grad_();
  std::vector<DispatchState> seen;
  std::vector<RngState> seen_rng;
  UnaryFn fn = [&](const Tensor& t) {
    seen.push_back(DispatchState::current());
    seen_rng.push_back(get_rng_state());
    return dropout(t * 2.0, 0.5, true);
  };
  const RngState forward_rng = get_rng_state();
  Tensor y = checkpoint(fn, x);
  const Tensor mask_forward = y.detach();
  Tensor loss = sum(y);
  randn({16});  // moves the generator on
  const RngState caller_rng = get_rng_state();
  ASSERT_NE(caller_rng.offset, forward_rng.offset);
  {
    AutocastGuard ac(kBFloat16);
    const DispatchState caller = DispatchState::current();
    loss.backward();
    EXPECT_EQ(DispatchState::current(), caller);
  }
  EXPECT_EQ(get_rng_state().offset, caller_rng.offset);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (DispatchState{.grad_mode = false, .autocast = {}}));  // forward: no_grad
  EXPECT_EQ(seen[1], (DispatchState{.grad_mode = true, .autocast = {}}));   // recomputation
  EXPECT_EQ(seen_rng[1].seed, forward_rng.seed);
  EXPECT_EQ(seen_rng[1].offset, forward_rng.offset);
  // Same dropout mask: the gradient is 2 / (1 - p) exactly where y is kept.
  const std::vector<float> g = x.grad().to_vector<float>();
  const std::vector<float> kept = mask_forward.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], kept[i] == 0.0f ? 0.0f : 4.0f) << i;
}

TEST(Checkpoint, ARecomputationThatThrowsRestoresTheCallersState) {
  manual_seed(13);
  Tensor x = randn({3}).requires_grad_();
  int calls = 0;
  Tensor y;
  {
    AutocastGuard ac(kFloat16);
    y = checkpoint(
        [&calls](const Tensor& t) {
          if (++calls == 2) throw ValueError("recomputation failing on purpose");
          return t * 2.0;
        },
        x);
  }
  Tensor loss = sum(y.to(kFloat32));
  randn({8});
  const RngState caller_rng = get_rng_state();
  const DispatchState caller = DispatchState::current();
  EXPECT_THROW(loss.backward(), ValueError);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(DispatchState::current(), caller);
  EXPECT_EQ(get_rng_state().seed, caller_rng.seed);
  EXPECT_EQ(get_rng_state().offset, caller_rng.offset);
}

TEST(Checkpoint, MatchesPyTorch) {
  // Values from PyTorch 1.13 (float64):
  //   vals(shape, a)[i] = ((i*a) % 13 - 6)/8 + 0.01 i
  //   x = vals((2,3), 5), w = vals((4,3), 7), b = vals((4,), 3), all requiring grad
  //   y = checkpoint(lambda x: gelu(linear(x, w, b)).tanh(), x, use_reentrant=True)
  //   (y * vals((2,4), 11)).sum().backward()
  auto vals = [](IntList shape, int64_t a) {
    std::vector<double> v(size_t(numel(shape)));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = double((int64_t(i) * a) % 13 - 6) / 8.0 + 0.01 * double(i);
    return from_vector(v, shape, kFloat64);
  };
  Tensor x = vals({2, 3}, 5).requires_grad_();
  Tensor w = vals({4, 3}, 7).requires_grad_();
  Tensor b = vals({4}, 3).requires_grad_();
  Tensor y = checkpoint([&](const Tensor& t) { return tanh(gelu(linear(t, w, b))); }, x);
  Tensor loss = sum(y * vals({2, 4}, 11));
  loss.backward();
  const double tol = 1e-12;
  EXPECT_TRUE(testing::allclose(loss, {0.5321024823273779}, tol, 0));
  EXPECT_TRUE(testing::allclose(x.grad(),
                                {0.12102233618598143, 0.03874753684199585, 0.1816630838620707,
                                 0.5000836333547284, -0.15963885267103764, 0.5230169715971474},
                                tol, 0));
  EXPECT_TRUE(testing::allclose(
      w.grad(),
      {0.06520690602945534, 0.010818781728329029, -0.04356934257279728, -0.07732484431195112,
       -0.03612236555486453, 0.005080113202222059, -0.013108691279867994, -0.08200093653762908,
       -0.15089318179539016, -0.36276805823766295, 0.08530669158657064, 0.5333814414108042},
      tol, 0));
  EXPECT_TRUE(testing::allclose(
      b.grad(), {-0.08565058945059262, 0.0648857933182466, -0.10849172481537178, 0.7056295272822577},
      tol, 0));
}

TEST(Checkpoint, NoGradModeRecordsNothing) {
  Tensor w = randn({3, 3}).requires_grad_();
  Tensor x = randn({2, 3});
  NoGradGuard ng;
  Tensor y = checkpoint([&](const Tensor& t) { return matmul(t, w); }, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(bitwise_equal(y, matmul(x, w)));
}

TEST(Checkpoint, NothingRequiringGradRecordsNothing) {
  Tensor x = randn({2, 3});
  Tensor y = checkpoint([](const Tensor& t) { return exp(t); }, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(bitwise_equal(y, exp(x)));
}

TEST(Checkpoint, BackwardTwice) {
  auto make = [](bool use_checkpoint) {
    manual_seed(4);
    Tensor x = randn({5}).requires_grad_();
    UnaryFn fn = [](const Tensor& t) { return dropout(tanh(t) * t, 0.4); };
    return std::pair{x, use_checkpoint ? checkpoint(fn, x) : fn(x)};
  };
  {
    auto [x, y] = make(true);
    sum(y).backward();
    EXPECT_THROW(sum(y).backward(), Error);
  }
  // With retain_graph both backwards recompute and accumulate, like a plain graph.
  auto [xp, yp] = make(false);
  Tensor lp = sum(yp);
  lp.backward(Tensor(), /*retain_graph=*/true);
  lp.backward();
  auto [xc, yc] = make(true);
  Tensor lc = sum(yc);
  lc.backward(Tensor(), /*retain_graph=*/true);
  lc.backward();
  EXPECT_TRUE(bitwise_equal(xc.grad(), xp.grad()));
}

TEST(Checkpoint, InputModifiedInPlaceAfterForwardFailsAtBackward) {
  Tensor a = randn({4}).requires_grad_();
  Tensor h = a * 2.0;
  Tensor y = checkpoint([](const Tensor& t) { return exp(t); }, h);
  h.add_(1.0);
  EXPECT_THROW(sum(y).backward(), Error);
}

TEST(Checkpoint, Errors) {
  Tensor x = randn({2, 2}).requires_grad_();
  EXPECT_THROW(checkpoint(UnaryFn(), x), ValueError);
  EXPECT_THROW(checkpoint(std::function<std::vector<Tensor>(const std::vector<Tensor>&)>(), {x}),
               ValueError);
  EXPECT_THROW(checkpoint([](const Tensor& t) { return t * 2.0; }, Tensor()), ValueError);
  EXPECT_THROW(checkpoint([](const std::vector<Tensor>& in) { return in; }, {x, Tensor()}),
               ValueError);
  EXPECT_THROW(checkpoint([](const std::vector<Tensor>&) { return std::vector<Tensor>{}; }, {x}),
               ValueError);
  EXPECT_THROW(checkpoint([](const Tensor&) { return Tensor(); }, x), ValueError);
  // A non-leaf that requires grad read from outside the inputs.
  Tensor outside = x * 3.0;
  try {
    checkpoint([&outside](const Tensor& t) { return t + outside; }, x);
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("not one of its inputs"), std::string::npos) << e.what();
  }

  std::vector<UnaryFn> fns(3, [](const Tensor& t) { return relu(t); });
  EXPECT_THROW(checkpoint_sequential(fns, 0, x), ValueError);
  EXPECT_THROW(checkpoint_sequential(fns, -1, x), ValueError);
  EXPECT_THROW(checkpoint_sequential(fns, 4, x), ValueError);
  EXPECT_THROW(checkpoint_sequential(std::vector<UnaryFn>{}, 1, x), ValueError);
  EXPECT_THROW(checkpoint_sequential(std::vector<UnaryFn>{UnaryFn()}, 1, x), ValueError);
  EXPECT_THROW(checkpoint_sequential(fns, 2, Tensor()), ValueError);
  nn::Sequential empty;
  EXPECT_THROW(checkpoint_sequential(empty, 1, x), ValueError);
}

TEST(Checkpoint, RecomputationThatDiffersFailsAtBackward) {
  Tensor x = randn({3}).requires_grad_();
  int calls = 0;
  Tensor y = checkpoint([&calls](const Tensor& t) { return ++calls == 1 ? t * 2.0 : sum(t); }, x);
  EXPECT_THROW(sum(y).backward(), Error);
  // Recomputed outputs that do not require grad.
  Tensor z = checkpoint([](const Tensor& t) { return t.detach() * 2.0; }, x);
  EXPECT_THROW(sum(z).backward(), Error);
}

}  // namespace
}  // namespace dtr
