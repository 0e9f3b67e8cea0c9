// nn::parallel::DistributedDataParallel under `mpirun -np N dtr_mpi_tests`:
// training on shards against single-process training on the full batch (the
// reference runs on every rank), bitwise identical parameters across ranks,
// no_sync accumulation, unused parameters (on every rank and on one rank
// only), checkpointed regions, and one rank under a tight DTR budget making
// exactly the collectives of the others (one all-reduce per bucket and step)
// and training to bitwise the parameters of an unbudgeted job.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "eager/distributed/distributed.h"
#include "testing.h"

namespace dtr::nn::parallel {
namespace {

using dtr::testing::allclose;
using dtr::testing::error_message;
namespace dist = dtr::distributed;

int rank() { return dist::get_rank(); }
int world_size() { return dist::get_world_size(); }

/// True when `t` holds bitwise the same bytes on every rank.
bool bitwise_same_on_every_rank(const Tensor& t) {
  Tensor flat = t.detach().contiguous().reshape({t.numel()});
  Tensor all = zeros({t.numel() * world_size()}, t.dtype());
  dist::all_gather_into_tensor(all, flat);
  const auto v = all.to_vector<double>();
  const size_t n = size_t(t.numel());
  for (int r = 1; r < world_size(); ++r)
    if (std::memcmp(v.data(), v.data() + size_t(r) * n, n * sizeof(double)) != 0) return false;
  return true;
}

/// The same int64 on every rank.
bool same_on_every_rank(int64_t x) {
  Tensor lo = from_vector<int64_t>({x}, {1}), hi = from_vector<int64_t>({x}, {1});
  dist::all_reduce(lo, dist::ReduceOp::kMax);
  hi.neg_();
  dist::all_reduce(hi, dist::ReduceOp::kMax);
  return lo.item<int64_t>() == x && -hi.item<int64_t>() == x;
}

/// A small MLP with an optional branch and a parameter used on some ranks only.
struct Net : UnaryModule {
  Linear l1{nullptr}, l2{nullptr}, l3{nullptr}, branch{nullptr}, extra{nullptr};
  bool use_branch = true;
  bool use_extra = true;
  bool checkpoint_middle = false;
  explicit Net(int64_t in = 6, int64_t hidden = 16, int64_t out = 3) : UnaryModule("Net") {
    l1 = register_module("l1", Linear(in, hidden));
    l2 = register_module("l2", Linear(hidden, hidden));
    branch = register_module("branch", Linear(hidden, hidden));
    extra = register_module("extra", Linear(hidden, hidden, /*bias=*/false));
    l3 = register_module("l3", Linear(hidden, out));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = tanh(l1->forward(x));
    auto middle = [this](const Tensor& v) {
      Tensor m = tanh(l2->forward(v));
      if (use_branch) m = m + tanh(branch->forward(m));
      return m;
    };
    h = checkpoint_middle ? checkpoint(middle, h) : middle(h);
    if (use_extra) h = h + extra->forward(h) * 0.5;
    return l3->forward(h);
  }
};

std::shared_ptr<Net> make_net(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<Net>();
}

/// The full batch, the same on every rank.
struct Batch {
  Tensor x, y;
};
Batch full_batch(int64_t per_rank, uint64_t seed = 99) {
  manual_seed(seed);
  Tensor x = randn({per_rank * world_size(), 6});
  Tensor y = randn({per_rank * world_size(), 3});
  return {x, y};
}
Batch shard(const Batch& b) {
  const int64_t n = b.x.size(0) / world_size();
  return {b.x.narrow(0, n * rank(), n).contiguous(), b.y.narrow(0, n * rank(), n).contiguous()};
}

void sgd_step(Module& m, double lr) {
  NoGradGuard no_grad;
  for (Tensor& p : m.parameters())
    if (p.grad().defined()) p.sub_(p.grad(), lr);
  m.zero_grad();
}

/// ~1.2 KiB buckets: Net's 16x16 weights (1 KiB) are buckets of their own.
DDPOptions small_buckets() {
  DDPOptions o;
  o.bucket_cap_mb = 1200.0 / (1024.0 * 1024.0);
  return o;
}

TEST(DDP, MatchesBucketsInReverseOrderUnderTheCap) {
  auto net = make_net(1);
  DistributedDataParallel ddp(net, small_buckets());
  const auto buckets = ddp.bucket_parameter_indices();
  ASSERT_EQ(buckets.size(), ddp.bucket_count());
  EXPECT_GE(ddp.bucket_count(), 4u);
  // Every parameter once; the first bucket holds the last parameter; within
  // and across buckets the order is reverse registration order.
  std::vector<size_t> order;
  for (size_t b = 0; b < buckets.size(); ++b) {
    EXPECT_LE(ddp.bucket_bytes(b), 1200) << "bucket " << b;
    for (size_t k : buckets[b]) order.push_back(k);
  }
  ASSERT_EQ(order.size(), ddp.parameters().size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], order.size() - 1 - i);
  // A parameter over the cap is a bucket alone; one bucket under a big cap.
  DDPOptions tiny;
  tiny.bucket_cap_mb = 100.0 / (1024.0 * 1024.0);
  DistributedDataParallel alone(make_net(1), tiny);
  EXPECT_EQ(alone.bucket_count(), alone.parameters().size());
  DistributedDataParallel one(make_net(1));
  EXPECT_EQ(one.bucket_count(), 1u);
  EXPECT_NE(error_message<ValueError>([] {
              DDPOptions bad;
              bad.bucket_cap_mb = 0;
              DistributedDataParallel d(make_net(1), bad);
            }).find("bucket_cap_mb"),
            std::string::npos);
}

TEST(DDP, MatchesSingleProcessTraining) {
  const int64_t B = 4;
  const Batch full = full_batch(B);
  const Batch mine = shard(full);
  auto ref = make_net(1);
  auto net = make_net(1 + uint64_t(rank()));  // different weights until the wrap
  DistributedDataParallel ddp(net, small_buckets());
  // The wrap broadcast rank 0's weights.
  for (size_t i = 0; i < ddp.parameters().size(); ++i)
    EXPECT_TRUE(testing::bitwise_equal(ddp.parameters()[i], ref->parameters()[i]));
  const auto& group = ddp.process_group();
  for (int step = 0; step < 3; ++step) {
    const int64_t calls = group->collective_calls();
    Tensor loss = mse_loss(ddp(mine.x), mine.y);
    loss.backward();
    EXPECT_EQ(group->collective_calls() - calls, int64_t(ddp.bucket_count()));
    EXPECT_EQ(ddp.buckets_reduced_last_step(), int64_t(ddp.bucket_count()));
    // Every bucket started while backward ran (all parameters are used).
    EXPECT_EQ(ddp.buckets_started_in_backward_last_step(), int64_t(ddp.bucket_count()));
    for (const Tensor& p : ddp.parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_TRUE(bitwise_same_on_every_rank(p.grad()));
    }
    sgd_step(*net, 0.1);
    mse_loss(ref->forward(full.x), full.y).backward();
    sgd_step(*ref, 0.1);
  }
  EXPECT_EQ(ddp.steps(), 3);
  const auto params = net->parameters(), expected = ref->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(allclose(params[i], expected[i].to_vector<double>(), 1e-5, 1e-4)) << i;
    EXPECT_TRUE(bitwise_same_on_every_rank(params[i])) << i;
  }
}

TEST(DDP, MatchesSyncedRunWithNoSyncAccumulation) {
  const int64_t B = 4;
  const Batch a = shard(full_batch(B, 5)), b = shard(full_batch(B, 6));
  auto acc = make_net(2), once = make_net(2);
  DistributedDataParallel dacc(acc, small_buckets()), donce(once, small_buckets());
  for (int step = 0; step < 2; ++step) {
    const int64_t calls = dacc.process_group()->collective_calls();
    {
      auto guard = dacc.no_sync();
      EXPECT_FALSE(dacc.require_backward_grad_sync());
      mse_loss(dacc(a.x), a.y).backward();
    }
    EXPECT_EQ(dacc.process_group()->collective_calls(), calls);  // nothing reduced
    EXPECT_TRUE(dacc.require_backward_grad_sync());
    mse_loss(dacc(b.x), b.y).backward();
    EXPECT_EQ(dacc.process_group()->collective_calls() - calls, int64_t(dacc.bucket_count()));
    (mse_loss(donce(a.x), a.y) + mse_loss(donce(b.x), b.y)).backward();
    for (size_t i = 0; i < acc->parameters().size(); ++i) {
      EXPECT_TRUE(allclose(acc->parameters()[i].grad(),
                           once->parameters()[i].grad().to_vector<double>(), 1e-6, 1e-5));
      EXPECT_TRUE(bitwise_same_on_every_rank(acc->parameters()[i].grad()));
    }
    sgd_step(*acc, 0.1);
    sgd_step(*once, 0.1);
  }
  EXPECT_EQ(dacc.steps(), 2);
}

// A branch unused on some steps (on every rank) and `extra` used on rank 0
// only: no error, one all-reduce per bucket, grads the same on every rank;
// a parameter no rank used keeps no grad, one that rank 0 alone used gets
// rank 0's gradient over the world size.
void run_unused(bool find_unused) {
  const Batch mine = shard(full_batch(4, 7));
  auto net = make_net(3);
  DDPOptions o = small_buckets();
  o.find_unused_parameters = find_unused;
  DistributedDataParallel ddp(net, o);
  net->use_extra = rank() == 0;
  Tensor local_extra;  // rank 0's gradient before the reduction
  net->extra->weight.register_post_accumulate_grad_hook(
      [&](Tensor& p) { local_extra = p.grad().clone(); });
  for (int step = 0; step < 3; ++step) {
    net->use_branch = step % 2 == 0;
    local_extra = Tensor();
    const int64_t calls = ddp.process_group()->collective_calls();
    Tensor out = ddp(mine.x);
    mse_loss(out, mine.y).backward();
    EXPECT_EQ(ddp.process_group()->collective_calls() - calls, int64_t(ddp.bucket_count()));
    EXPECT_EQ(net->branch->weight.grad().defined(), net->use_branch) << "step " << step;
    Tensor eg = net->extra->weight.grad();
    ASSERT_TRUE(eg.defined()) << "rank " << rank() << " step " << step;
    EXPECT_TRUE(bitwise_same_on_every_rank(eg));
    Tensor expected = rank() == 0 ? local_extra : zeros_like(eg);
    dist::broadcast(expected, 0);
    EXPECT_TRUE(allclose(eg, (expected / double(world_size())).to_vector<double>(), 1e-7, 1e-6));
    for (const Tensor& p : ddp.parameters()) {
      if (p.grad().defined()) {
        EXPECT_TRUE(bitwise_same_on_every_rank(p.grad()));
      }
    }
    sgd_step(*net, 0.05);
  }
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(bitwise_same_on_every_rank(p));
}

TEST(DDP, MatchesWithUnusedParameters) { run_unused(/*find_unused=*/false); }
TEST(DDP, MatchesWithUnusedParametersFound) { run_unused(/*find_unused=*/true); }

TEST(DDP, MatchesWithAnUnusedBucketStartedBeforeBackward) {
  // With find_unused_parameters the walk finds branch unused, and its
  // buckets (1 KiB weight, bias) start before backward.
  const Batch mine = shard(full_batch(4, 8));
  auto net = make_net(4);
  net->use_branch = false;
  DDPOptions o = small_buckets();
  o.find_unused_parameters = true;
  DistributedDataParallel ddp(net, o);
  const int64_t calls = ddp.process_group()->collective_calls();
  Tensor out = ddp(mine.x);
  mse_loss(out, mine.y).backward();
  EXPECT_EQ(ddp.process_group()->collective_calls() - calls, int64_t(ddp.bucket_count()));
  EXPECT_FALSE(net->branch->weight.grad().defined());
  EXPECT_TRUE(net->l1->weight.grad().defined());
}

// With find_unused_parameters, the walk from the outputs meets the checkpoint
// node and marks nothing: l2 and branch, reached only by the region's nested
// backward, must not be marked unused (their buckets would start with zeros
// and their gradients arrive late).
void run_checkpointed(bool find_unused) {
  const Batch mine = shard(full_batch(4, 9));
  auto plain = make_net(5), ckpt = make_net(5);
  ckpt->checkpoint_middle = true;
  DDPOptions o = small_buckets();
  o.find_unused_parameters = find_unused;
  DistributedDataParallel dp(plain, o), dc(ckpt, o);
  for (int step = 0; step < 2; ++step) {
    const int64_t calls = dc.process_group()->collective_calls();
    mse_loss(dc(mine.x), mine.y).backward();
    EXPECT_EQ(dc.process_group()->collective_calls() - calls, int64_t(dc.bucket_count()));
    mse_loss(dp(mine.x), mine.y).backward();
    for (size_t i = 0; i < plain->parameters().size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(plain->parameters()[i].grad(), ckpt->parameters()[i].grad()));
    sgd_step(*plain, 0.1);
    sgd_step(*ckpt, 0.1);
  }
}

TEST(DDP, CheckpointedRegionsMatchTheUncheckpointedModel) { run_checkpointed(false); }
TEST(DDP, CheckpointedRegionsMatchWithFindUnusedParameters) { run_checkpointed(true); }

/// Linear with a buffer (a step counter, a running statistic).
struct WithBuffer : UnaryModule {
  Linear fc{nullptr};
  Tensor stat;
  WithBuffer() : UnaryModule("WithBuffer") {
    fc = register_module("fc", Linear(6, 3));
    stat = register_buffer("stat", zeros({4}));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x); }
};

TEST(DDP, MatchesRankZerosBuffersAtWrapAndAtEachForward) {
  manual_seed(20 + uint64_t(rank()));
  auto m = std::make_shared<WithBuffer>();
  {
    NoGradGuard no_grad;
    m->stat.fill_(double(rank() + 1));
  }
  DistributedDataParallel ddp(m);
  EXPECT_TRUE(allclose(m->stat, {1, 1, 1, 1}));
  EXPECT_TRUE(bitwise_same_on_every_rank(m->fc->weight));
  // Each rank changes its buffer; the next forward starts from rank 0's, with
  // one broadcast per buffer, inside no_sync too.
  {
    NoGradGuard no_grad;
    m->stat.fill_(double(10 * (rank() + 1)));
  }
  const int64_t calls = ddp.process_group()->collective_calls();
  Tensor x = ones({2, 6});
  {
    auto guard = ddp.no_sync();
    (void)ddp(x);
  }
  EXPECT_EQ(ddp.process_group()->collective_calls() - calls, 1);
  EXPECT_TRUE(allclose(m->stat, {10, 10, 10, 10}));
  // broadcast_buffers = false: buffers stay each rank's own.
  DDPOptions o;
  o.broadcast_buffers = false;
  auto m2 = std::make_shared<WithBuffer>();
  DistributedDataParallel d2(m2, o);
  {
    NoGradGuard no_grad;
    m2->stat.fill_(double(rank()));
  }
  const int64_t calls2 = d2.process_group()->collective_calls();
  (void)d2(x);
  EXPECT_EQ(d2.process_group()->collective_calls(), calls2);
  EXPECT_TRUE(allclose(m2->stat, std::vector<double>(4, double(rank()))));
}

TEST(DDP, ABackwardThatThrewLeavesTheNextStepWorking) {
  // A hook after DDP's on l1.weight (the last gradient) throws on the first
  // step, on every rank: every bucket had started, the end-of-backward
  // callback is dropped, and the next backward starts a fresh step.
  const Batch mine = shard(full_batch(4, 12));
  auto net = make_net(7);
  DistributedDataParallel ddp(net, small_buckets());
  bool fail = true;
  net->l1->weight.register_post_accumulate_grad_hook([&](Tensor&) {
    if (fail) throw IndexError("injected");
  });
  EXPECT_EQ(error_message<IndexError>([&] { mse_loss(ddp(mine.x), mine.y).backward(); }), "injected");
  EXPECT_EQ(ddp.steps(), 0);
  fail = false;
  net->zero_grad();
  const int64_t calls = ddp.process_group()->collective_calls();
  mse_loss(ddp(mine.x), mine.y).backward();
  EXPECT_EQ(ddp.process_group()->collective_calls() - calls, int64_t(ddp.bucket_count()));
  EXPECT_EQ(ddp.steps(), 1);
  // The grads are this step's alone: the same as an unwrapped model's on the
  // mean loss over all shards.
  auto ref = make_net(7);
  const Batch full = full_batch(4, 12);
  mse_loss(ref->forward(full.x), full.y).backward();
  for (size_t i = 0; i < ddp.parameters().size(); ++i) {
    EXPECT_TRUE(bitwise_same_on_every_rank(ddp.parameters()[i].grad()));
    EXPECT_TRUE(allclose(ddp.parameters()[i].grad(), ref->parameters()[i].grad().to_vector<double>(),
                         1e-6, 1e-4));
  }
}

/// l1, l2, l3; forward uses each once.
struct ThreeLayers : UnaryModule {
  Linear l1{nullptr}, l2{nullptr}, l3{nullptr};
  ThreeLayers() : UnaryModule("ThreeLayers") {
    l1 = register_module("l1", Linear(6, 16));
    l2 = register_module("l2", Linear(16, 16));
    l3 = register_module("l3", Linear(16, 3));
  }
  Tensor forward(const Tensor& x) override {
    return l3->forward(tanh(l2->forward(tanh(l1->forward(x)))));
  }
};

TEST(DDP, AGradientAfterItsBucketWasReducedIsAValueErrorOnEveryRank) {
  // l2 used in two checkpoint regions: the later region's recomputation
  // makes bucket 0 (l3.bias, l3.weight, l2.bias) ready and it starts; the
  // earlier region's adds to l2.bias afterwards.
  const Batch mine = shard(full_batch(4, 10));
  manual_seed(6);
  auto net = std::make_shared<ThreeLayers>();
  DistributedDataParallel ddp(net, small_buckets());
  ASSERT_EQ(ddp.bucket_count(), 3u);
  auto twice = [&] {
    Tensor h = tanh(net->l1->forward(mine.x));
    h = checkpoint([&](const Tensor& v) { return tanh(net->l2->forward(v)); }, h);
    h = checkpoint([&](const Tensor& v) { return tanh(net->l2->forward(v)); }, h);
    mse_loss(net->l3->forward(h), mine.y).backward();
  };
  const int64_t calls = ddp.process_group()->collective_calls();
  const std::string message = error_message<ValueError>(twice);
  EXPECT_NE(message.find("'l2.bias' received a gradient after its bucket 0 was already all-reduced"),
            std::string::npos)
      << message;
  // Every bucket was still reduced once on every rank: the next step works.
  EXPECT_EQ(ddp.process_group()->collective_calls() - calls, int64_t(ddp.bucket_count()));
  net->zero_grad();
  mse_loss(ddp(mine.x), mine.y).backward();
  for (const Tensor& p : ddp.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(bitwise_same_on_every_rank(p.grad()));
  }
}

/// A deeper MLP whose activations are worth evicting.
struct Deep : UnaryModule {
  std::vector<Linear> layers;
  Deep() : UnaryModule("Deep") {
    for (int i = 0; i < 6; ++i)
      layers.push_back(register_module(std::to_string(i), Linear(64, 64)));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& l : layers) h = tanh(l->forward(h));
    return h;
  }
};

struct DeepRun {
  std::vector<std::vector<float>> params;
  std::vector<int64_t> calls_per_step;
  int64_t rematerializations = 0;
  int64_t peak = 0, base = 0;
  size_t buckets = 0;
};

/// Trains Deep for 3 steps on this rank's shard; `budget` (bytes above the
/// resident bytes at the start) applies on rank 0 only.
DeepRun train_deep(std::optional<double> activation_fraction, int64_t activation_bytes) {
  manual_seed(11);
  auto net = std::make_shared<Deep>();
  DDPOptions o;
  o.bucket_cap_mb = 20000.0 / (1024.0 * 1024.0);  // one 16 KiB weight and its bias per bucket
  DistributedDataParallel ddp(net, o);
  manual_seed(12);
  Tensor x = randn({128 * world_size(), 64}).narrow(0, 128 * rank(), 128).contiguous();
  Tensor y = randn({128 * world_size(), 64}).narrow(0, 128 * rank(), 128).contiguous();
  DeepRun run;
  run.buckets = ddp.bucket_count();
  remat::reset_stats();
  run.base = remat::stats().resident_bytes;
  std::optional<testing::BudgetScope> budget;
  if (activation_fraction && rank() == 0)
    budget.emplace(run.base + int64_t(double(activation_bytes) * *activation_fraction));
  for (int step = 0; step < 3; ++step) {
    const int64_t calls = ddp.process_group()->collective_calls();
    mse_loss(ddp(x), y).backward();
    run.calls_per_step.push_back(ddp.process_group()->collective_calls() - calls);
    sgd_step(*net, 0.05);
  }
  run.peak = remat::stats().peak_bytes;
  run.rematerializations = remat::stats().rematerializations;
  for (const Tensor& p : net->parameters()) run.params.push_back(p.to_vector<float>());
  return run;
}

TEST(DDP, ATightBudgetOnOneRankTrainsToTheSameParametersWithTheSameCollectives) {
  const DeepRun free = train_deep(std::nullopt, 0);
  const DeepRun tight = train_deep(0.6, free.peak - free.base);
  ASSERT_GE(free.buckets, 6u);
  EXPECT_EQ(tight.buckets, free.buckets);
  if (rank() == 0) {
    EXPECT_GT(tight.rematerializations, 0);
    EXPECT_LT(tight.peak - tight.base, free.peak - free.base);
  } else {
    EXPECT_EQ(tight.rematerializations, 0);
  }
  for (size_t s = 0; s < tight.calls_per_step.size(); ++s) {
    EXPECT_EQ(tight.calls_per_step[s], int64_t(tight.buckets)) << "step " << s;
    EXPECT_EQ(free.calls_per_step[s], int64_t(free.buckets)) << "step " << s;
    EXPECT_TRUE(same_on_every_rank(tight.calls_per_step[s]));
  }
  ASSERT_EQ(tight.params.size(), free.params.size());
  for (size_t i = 0; i < free.params.size(); ++i) {
    ASSERT_EQ(tight.params[i].size(), free.params[i].size());
    EXPECT_EQ(std::memcmp(tight.params[i].data(), free.params[i].data(),
                          free.params[i].size() * sizeof(float)),
              0)
        << "parameter " << i;
    EXPECT_TRUE(bitwise_same_on_every_rank(
        from_vector(tight.params[i], {int64_t(tight.params[i].size())})));
  }
}

}  // namespace
}  // namespace dtr::nn::parallel
