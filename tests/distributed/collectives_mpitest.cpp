// Collectives of dtr::distributed over MPI, run by every rank of
// `mpirun -np N dtr_mpi_tests` (N = 2 and 3): values against hand-computed
// ones, bitwise agreement across ranks, the differentiable forms, sub-groups,
// and bad input as a typed error on every rank, never a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "eager/distributed/distributed.h"
#include "testing.h"

namespace dtr::distributed {
namespace {

using dtr::testing::allclose;
using dtr::testing::error_message;

int rank() { return get_rank(); }
int world_size() { return get_world_size(); }

/// 1 on every rank when `ok` holds on every rank (an all_reduce of flags).
bool on_every_rank(bool ok) {
  Tensor flag = from_vector<int64_t>({ok ? 0 : 1}, {1});
  all_reduce(flag, ReduceOp::kSum);
  return flag.item<int64_t>() == 0;
}

/// Every rank's copy of `t`, gathered: true when all are bitwise equal.
bool bitwise_same_on_every_rank(const Tensor& t) {
  Tensor flat = t.detach().contiguous().reshape({-1});
  Tensor all = functional::all_gather(flat);
  const int64_t n = flat.numel();
  const size_t bytes = size_t(n) * itemsize(t.dtype());
  const auto* base = static_cast<const std::byte*>(all.contiguous().const_data_ptr());
  for (int r = 1; r < world_size(); ++r)
    if (std::memcmp(base, base + size_t(r) * bytes, bytes) != 0) return false;
  return true;
}

TEST(Collectives, AllReduceSumMeanMax) {
  const int W = world_size(), r = rank();
  // Rank r holds [r, r+1, r+2, 10·r].
  Tensor t = from_vector<float>({float(r), float(r + 1), float(r + 2), float(10 * r)}, {4});
  Tensor m = t.clone(), x = t.clone();
  all_reduce(t, ReduceOp::kSum);
  const double s = W * (W - 1) / 2.0;
  EXPECT_TRUE(allclose(t, {s, s + W, s + 2 * W, 10 * s}));
  all_reduce(m, ReduceOp::kMean);
  EXPECT_TRUE(allclose(m, {s / W, s / W + 1, s / W + 2, 10 * s / W}));
  all_reduce(x, ReduceOp::kMax);
  EXPECT_TRUE(allclose(x, {double(W - 1), double(W), double(W + 1), 10.0 * (W - 1)}));
}

TEST(Collectives, AllReduceIntegerAndHalfDtypes) {
  const int W = world_size(), r = rank();
  Tensor i64 = from_vector<int64_t>({int64_t(1) << 40, r}, {2});
  all_reduce(i64);
  EXPECT_EQ(i64.to_vector<int64_t>(), (std::vector<int64_t>{W * (int64_t(1) << 40), W * (W - 1) / 2}));
  for (DType dt : {kFloat16, kBFloat16, kFloat64}) {
    Tensor h = (ones({3}) * double(r + 1)).to(dt);
    all_reduce(h, ReduceOp::kSum);
    const double s = W * (W + 1) / 2.0;
    EXPECT_TRUE(allclose(h, {s, s, s})) << dtype_name(dt);
  }
  Tensor bad = from_vector<int64_t>({1}, {1});
  EXPECT_NE(error_message<TypeError>([&] { all_reduce(bad, ReduceOp::kMean); }).find("floating"),
            std::string::npos);
}

TEST(Collectives, FloatSumIsBitwiseIdenticalOnEveryRank) {
  manual_seed(uint64_t(100 + rank()));  // different values per rank
  Tensor t = randn({1000}) * 1e3 + randn({1000}) * 1e-3;
  all_reduce(t, ReduceOp::kSum);
  EXPECT_TRUE(bitwise_same_on_every_rank(t));
  Tensor m = randn({777});
  all_reduce(m, ReduceOp::kMean);
  EXPECT_TRUE(bitwise_same_on_every_rank(m));
}

TEST(Collectives, BroadcastFromLastRank) {
  const int W = world_size(), r = rank();
  Tensor t = full({2, 3}, double(r * 7 + 1));
  broadcast(t, W - 1);
  EXPECT_TRUE(allclose(t, std::vector<double>(6, double((W - 1) * 7 + 1))));
  EXPECT_NE(error_message<ValueError>([&] { broadcast(t, W); }).find("src"), std::string::npos);
}

TEST(Collectives, AllGatherAndReduceScatter) {
  const int W = world_size(), r = rank();
  Tensor in = from_vector<float>({float(r), float(100 + r)}, {1, 2});
  Tensor out = zeros({W, 2});
  all_gather_into_tensor(out, in);
  std::vector<double> want;
  for (int k = 0; k < W; ++k) want.insert(want.end(), {double(k), double(100 + k)});
  EXPECT_TRUE(allclose(out, want));

  std::vector<Tensor> list;
  for (int k = 0; k < W; ++k) list.push_back(zeros({1, 2}));
  all_gather(list, in);
  for (int k = 0; k < W; ++k) EXPECT_TRUE(allclose(list[size_t(k)], {double(k), double(100 + k)}));

  // Rank r contributes [r·W + j for j in 0..2W): block k of the sum is
  // Σ_r (r·W + 2k), Σ_r (r·W + 2k + 1).
  std::vector<float> v;
  for (int j = 0; j < 2 * W; ++j) v.push_back(float(r * W + j));
  Tensor big = from_vector<float>(v, {W, 2});
  Tensor mine = zeros({1, 2});
  reduce_scatter_tensor(mine, big, ReduceOp::kSum);
  const double base = W * (W - 1) / 2.0 * W;
  EXPECT_TRUE(allclose(mine, {base + W * 2.0 * r, base + W * (2.0 * r + 1)}));

  Tensor wrong = zeros({W + 1, 2});
  EXPECT_NE(error_message<ValueError>([&] { all_gather_into_tensor(wrong, in); }).find("needs shape"),
            std::string::npos);
}

TEST(Collectives, AsyncWorkOverlapsAndCompletesInOrder) {
  const int W = world_size();
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 6; ++i) {
    ts.push_back(full({1000}, double(i + rank())));
    works.push_back(all_reduce(ts.back(), ReduceOp::kSum, nullptr, /*async_op=*/true));
    ASSERT_NE(works.back(), nullptr);
  }
  for (int i = 5; i >= 0; --i) works[size_t(i)]->wait();  // any wait order
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(works[size_t(i)]->is_completed());
    EXPECT_FLOAT_EQ(ts[size_t(i)].to_vector<float>()[999], float(W * i + W * (W - 1) / 2));
  }
  barrier();
}

TEST(Collectives, FunctionalFormsAreDifferentiable) {
  const int W = world_size(), r = rank();
  Tensor x = full({2, 2}, double(r + 1)).requires_grad_();
  Tensor y = functional::all_reduce(x * 2.0, ReduceOp::kSum);
  EXPECT_TRUE(allclose(y, std::vector<double>(4, W * (W + 1.0))));
  // Every rank's loss is sum(y · (rank + 1)); d(Σ losses)/dx = 2 Σ_k (k + 1).
  (y * double(r + 1)).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), std::vector<double>(4, 2.0 * W * (W + 1) / 2.0)));

  Tensor a = full({1, 3}, double(r)).requires_grad_();
  Tensor g = functional::all_gather(a);
  ASSERT_EQ(g.shape(), (Shape{W, 3}));
  // loss_k = Σ_j (j + 1)·row_j: d/da_r = Σ_k (r + 1) = W (r + 1).
  Tensor w = arange(1, W + 1).to(kFloat32).reshape({W, 1});
  (g * w).sum().backward();
  EXPECT_TRUE(allclose(a.grad(), std::vector<double>(3, double(W * (r + 1)))));

  Tensor b = full({W, 1}, double(r + 1)).requires_grad_();
  Tensor s = functional::reduce_scatter(b, ReduceOp::kSum);
  EXPECT_TRUE(allclose(s, {W * (W + 1) / 2.0}));
  (s * double(r + 1)).sum().backward();  // d/db_k[block j] = j + 1
  std::vector<double> want;
  for (int j = 0; j < W; ++j) want.push_back(double(j + 1));
  EXPECT_TRUE(allclose(b.grad(), want));

  Tensor c = full({2}, double(r + 5)).requires_grad_();
  Tensor bc = functional::broadcast(c, 0);
  EXPECT_TRUE(allclose(bc, {5.0, 5.0}));
  bc.sum().backward();
  EXPECT_TRUE(allclose(c.grad(), std::vector<double>(2, r == 0 ? double(W) : 0.0)));

  Tensor mx = full({1}, double(r)).requires_grad_();
  Tensor ymx = functional::all_reduce(mx, ReduceOp::kMax);
  EXPECT_NE(error_message<NotImplementedError>([&] { ymx.sum().backward(); }).find("no gradient"),
            std::string::npos);
}

TEST(Collectives, MismatchedShapesFailOnEveryRankBeforeAnyDataMoves) {
  const int r = rank();
  Tensor t = ones({r == 0 ? 4 : 5});
  const std::string msg = error_message<DistributedError>([&] { all_reduce(t); });
  EXPECT_NE(msg.find("different"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[5]"), std::string::npos) << msg;
  EXPECT_TRUE(allclose(t, std::vector<double>(size_t(t.numel()), 1.0)));  // untouched
  EXPECT_TRUE(on_every_rank(!msg.empty()));
  // The group is still usable: the failure was the same on every rank.
  Tensor ok = ones({3});
  all_reduce(ok);
  EXPECT_TRUE(allclose(ok, std::vector<double>(3, double(world_size()))));
}

TEST(Collectives, DifferentCollectivesFailOnEveryRank) {
  Tensor t = ones({3});
  const std::string msg = error_message<DistributedError>([&] {
    if (rank() == 0) broadcast(t, 0);
    else all_reduce(t);
  });
  EXPECT_NE(msg.find("broadcast"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
  EXPECT_TRUE(on_every_rank(!msg.empty()));
}

// The mpi group runs on the CPU: that is the device every rank's model
// belongs on (an nccl group names cuda:LOCAL_RANK instead).
TEST(Collectives, TheMpiGroupsDeviceIsTheCpu) {
  EXPECT_EQ(world()->device(), Device(kCPU));
  EXPECT_EQ(world()->device_type(), kCPU);
  EXPECT_TRUE(on_every_rank(true));
}

TEST(Collectives, NonContiguousInPlaceIsAValueErrorAndTheFunctionalFormCopies) {
  Tensor t = ones({3, 4}).transpose(0, 1);
  EXPECT_NE(error_message<ValueError>([&] { all_reduce(t); }).find("contiguous"), std::string::npos);
  Tensor y = functional::all_reduce(t);  // reads any layout
  EXPECT_TRUE(allclose(y, std::vector<double>(12, double(world_size()))));
  EXPECT_TRUE(on_every_rank(true));
}

// A bad argument that only one rank's own checks see: that rank still joins
// the collective, as a refusal carried by its fingerprint, so every rank
// throws the same typed error naming the op, the refusing rank and what was
// wrong, at once: the group's timeout is short, so a rank left waiting for
// it would throw CollectiveTimeoutError instead and fail the test. No data
// moves, and the group stays usable.
TEST(Collectives, ABadArgumentOnOneRankIsTheSameTypedErrorOnEveryRank) {
  const int W = world_size(), r = rank(), bad = W - 1;
  std::vector<int> everyone;
  for (int k = 0; k < W; ++k) everyone.push_back(k);
  auto g = new_group(everyone, /*timeout_seconds=*/15.0);
  const std::string refused = fmt::format("rank [{}] refused", bad);

  // all_reduce of a non-contiguous tensor on the last rank only.
  Tensor t = r == bad ? ones({3, 4}).transpose(0, 1) : ones({4, 3});
  std::string msg = error_message<ValueError>([&] { all_reduce(t, ReduceOp::kSum, g); });
  EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find(refused), std::string::npos) << msg;
  EXPECT_NE(msg.find("contiguous"), std::string::npos) << msg;
  EXPECT_TRUE(allclose(t, std::vector<double>(12, 1.0)));  // no data moved

  // broadcast from a src that only the last rank gets wrong; the others
  // asked for a Work, whose wait throws the same.
  Tensor b = full({2}, double(r));
  msg = error_message<ValueError>([&] {
    if (r == bad) {
      broadcast(b, W, g);
    } else {
      broadcast(b, 0, g, /*async_op=*/true)->wait();
    }
  });
  EXPECT_NE(msg.find("broadcast"), std::string::npos) << msg;
  EXPECT_NE(msg.find(refused), std::string::npos) << msg;
  EXPECT_NE(msg.find("src"), std::string::npos) << msg;
  EXPECT_TRUE(allclose(b, {double(r), double(r)}));

  // A differentiable form: mean of an integer tensor on the last rank (TypeError).
  Tensor x = r == bad ? from_vector<int64_t>({1, 2}, {2}) : from_vector<float>({1, 2}, {2});
  msg = error_message<TypeError>([&] { (void)functional::all_reduce(x, ReduceOp::kMean, g); });
  EXPECT_NE(msg.find(refused), std::string::npos) << msg;
  EXPECT_NE(msg.find("floating"), std::string::npos) << msg;

  // all_gather_into_tensor into a wrong output on rank 0 only.
  Tensor in = ones({1, 2});
  Tensor out = zeros({r == 0 ? W + 1 : W, 2});
  msg = error_message<ValueError>([&] { all_gather_into_tensor(out, in, g); });
  EXPECT_NE(msg.find("rank [0] refused"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs shape"), std::string::npos) << msg;

  // Several ranks refuse for different reasons: every rank throws the type
  // of the lowest refusing rank, and the message gives every reason.
  Tensor m = r == 0 ? from_vector<int64_t>({1}, {1}) : ones({2, 2}).transpose(0, 1);
  msg = error_message<TypeError>([&] { all_reduce(m, ReduceOp::kMean, g); });
  EXPECT_NE(msg.find("rank 0: "), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("rank {}: ", bad)), std::string::npos) << msg;
  EXPECT_NE(msg.find("floating"), std::string::npos) << msg;
  EXPECT_NE(msg.find("contiguous"), std::string::npos) << msg;

  // Still usable, and every rank counted the same collectives.
  EXPECT_TRUE(g->healthy());
  Tensor ok = full({3}, double(r + 1));
  all_reduce(ok, ReduceOp::kSum, g);
  EXPECT_TRUE(allclose(ok, std::vector<double>(3, W * (W + 1) / 2.0)));
  EXPECT_TRUE(bitwise_same_on_every_rank(from_vector<int64_t>({g->collective_calls()}, {1})));
  destroy_process_group(g);
}

// The fingerprint compares the whole shape: tensors alike in their first 8
// dims, their rank and element count, that differ only beyond, fail on
// every rank before any data moves.
TEST(Collectives, ShapesThatDifferOnlyPastTheEighthDimFailOnEveryRank) {
  Shape s{1, 1, 1, 1, 1, 1, 1, 1, 2, 3};
  if (rank() == world_size() - 1) s = {1, 1, 1, 1, 1, 1, 1, 1, 3, 2};
  Tensor t = ones(s);
  const std::string msg = error_message<DistributedError>([&] { all_reduce(t); });
  EXPECT_NE(msg.find("different"), std::string::npos) << msg;
  EXPECT_NE(msg.find("10 dims"), std::string::npos) << msg;
  EXPECT_TRUE(allclose(t, std::vector<double>(6, 1.0)));
  Tensor ok = ones({1});
  all_reduce(ok);
  EXPECT_TRUE(allclose(ok, {double(world_size())}));
}

TEST(Groups, SubGroupOfTheFirstTwoRanks) {
  auto g = new_group({0, 1});
  const int r = rank();
  if (r <= 1) {
    EXPECT_EQ(g->rank(), r);
    EXPECT_EQ(g->size(), 2);
    Tensor t = full({2}, double(r + 1));
    all_reduce(t, ReduceOp::kSum, g);
    EXPECT_TRUE(allclose(t, {3.0, 3.0}));
  } else {
    EXPECT_EQ(g->rank(), -1);
    Tensor t = ones({2});
    EXPECT_NE(error_message<DistributedError>([&] { all_reduce(t, ReduceOp::kSum, g); }).find("not a member"),
              std::string::npos);
  }
  destroy_process_group(g);
  Tensor t = ones({1});
  EXPECT_NE(error_message<DistributedError>([&] { all_reduce(t, ReduceOp::kSum, g); }).find("destroyed"),
            std::string::npos);
  EXPECT_NE(error_message<ValueError>([&] { new_group({1, 0}); }).find("sorted"), std::string::npos);
  EXPECT_NE(error_message<ValueError>([&] { new_group({0, world_size()}); }).find("out of range"),
            std::string::npos);
  barrier();
}

TEST(Groups, ACollectiveARankNeverJoinsTimesOutNamingIt) {
  // A sub-group with a short timeout: rank 0 all-reduces, rank 1 never does.
  auto g = new_group({0, 1}, /*timeout_seconds=*/1.0);
  if (rank() == 0) {
    Tensor t = ones({4});
    const std::string msg = error_message<CollectiveTimeoutError>([&] { all_reduce(t, ReduceOp::kSum, g); });
    EXPECT_NE(msg.find("rank [1] never joined"), std::string::npos) << msg;
    EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
    EXPECT_FALSE(g->healthy());
    EXPECT_NE(error_message<DistributedError>([&] { all_reduce(t, ReduceOp::kSum, g); }).find("unusable"),
              std::string::npos);
  }
  barrier();  // the world group is unaffected
  destroy_process_group(g);
}

TEST(Groups, CollectivesAreNeverReplayedUnderABudget) {
  // A model whose forward all-reduces an activation (tensor parallelism in
  // miniature), trained under a budget on rank 0 only: the budgeted rank
  // rematerializes, yet each rank launches exactly the same collectives per
  // step, and the results are bitwise those of the unbudgeted rank.
  manual_seed(7);  // same weights on every rank
  Tensor w1 = (randn({64, 256}) * 0.1).requires_grad_();
  Tensor w2 = (randn({256, 64}) * 0.1).requires_grad_();
  auto g = world();
  auto step = [&](int s) {
    manual_seed(uint64_t(1000 + s));
    Tensor x = randn({256, 64});
    Tensor h = relu(matmul(x, w1));
    h = functional::all_reduce(h, ReduceOp::kMean, g);
    h = relu(matmul(h, w2));
    h = relu(matmul(h, w1));
    Tensor loss = (h * h).mean();
    loss.backward();  // the all_reduce's backward is one more collective
    NoGradGuard ng;
    w1.sub_(w1.grad() * 0.01);
    w2.sub_(w2.grad() * 0.01);
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    return loss.item<float>();
  };
  (void)step(0);  // peak of an unbudgeted step
  const int64_t peak = remat::stats().peak_bytes;
  remat::reset_stats();
  std::vector<float> losses;
  std::vector<int64_t> calls_per_step;
  {
    dtr::testing::BudgetScope budget(rank() == 0 ? std::optional<int64_t>(peak * 8 / 10) : std::nullopt);
    for (int s = 1; s <= 4; ++s) {
      const int64_t before = g->collective_calls();
      losses.push_back(step(s));
      calls_per_step.push_back(g->collective_calls() - before);
    }
  }
  for (int64_t c : calls_per_step) EXPECT_EQ(c, 2);  // forward and backward all_reduce
  if (rank() == 0) {
    EXPECT_GT(remat::stats().rematerializations, 0);
  }
  EXPECT_TRUE(bitwise_same_on_every_rank(w1));
  EXPECT_TRUE(bitwise_same_on_every_rank(w2));
  EXPECT_TRUE(bitwise_same_on_every_rank(from_vector<float>(losses, {int64_t(losses.size())})));
}

}  // namespace
}  // namespace dtr::distributed
