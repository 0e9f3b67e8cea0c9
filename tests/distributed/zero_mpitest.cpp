// Optimizer-state sharding (ZeRO stage 1: the zero_redundancy option of SGD
// and AdamW), run by every rank under mpirun: a sharded optimizer against an
// unsharded one on the same parameters and gradients, bitwise, on every
// rank; the bytes of state each rank holds; the consolidated state_dict
// against the unsharded one; loading a full state into other shardings.
//
// The gradients are made on every rank alike (what DDP's all-reduce leaves),
// so the unsharded optimizer, run on each rank, is the reference.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "eager/distributed/distributed.h"
#include "testing.h"

namespace dtr {
namespace {

namespace dist = distributed;

/// Shapes whose sizes do not divide evenly by 2 or 3, one large enough that
/// the all-gather runs in several rounds (2.4M float32 > 8 MiB), and a
/// float64 parameter (its own flat sequence).
struct Shape_ {
  std::vector<int64_t> shape;
  DType dtype;
};
const std::vector<Shape_>& shapes() {
  static const std::vector<Shape_> s = {
      {{5, 3}, kFloat32}, {{7}, kFloat32}, {{2, 2, 3}, kFloat64}, {{1}, kFloat32},
      {{1200, 2000}, kFloat32}, {{11}, kFloat32}, {{4}, kFloat64},
  };
  return s;
}

/// Deterministic values of `n` elements for (seed, index): the same on every rank.
std::vector<double> values(int64_t n, int64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((i * 7 + seed * 13) % 23 - 11) / 16.0 + 1e-3 * double(seed);
  return v;
}

std::vector<Tensor> make_params() {
  std::vector<Tensor> ps;
  for (size_t k = 0; k < shapes().size(); ++k) {
    const auto& s = shapes()[k];
    Tensor p = from_vector(values(numel(s.shape), int64_t(k)), s.shape, s.dtype);
    p.requires_grad_();
    ps.push_back(p);
  }
  return ps;
}

/// The gradients of step `step` (parameter 3 has none at step 2: it keeps
/// its values and state that step).
void set_grads(const std::vector<Tensor>& ps, int step) {
  for (size_t k = 0; k < ps.size(); ++k) {
    Tensor p = ps[k];
    if (k == 3 && step == 2) {
      p.set_grad(Tensor());
      continue;
    }
    p.set_grad(from_vector(values(p.numel(), int64_t(100 * step + k)), p.shape(), p.dtype()));
  }
}

/// Whether `a` and `b` hold bitwise the same elements (dtype and shape too).
::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    return ::testing::AssertionFailure() << "dtype/shape " << a.str() << " vs " << b.str();
  }
  // float32 → float64 is exact and one-to-one, so equal doubles mean equal bits.
  const std::vector<double> x = a.to(kFloat64).to_vector<double>(), y = b.to(kFloat64).to_vector<double>();
  if (std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) != 0) {
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0) {
        return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_state(const StateDict& a, const StateDict& b) {
  if (a.keys() != b.keys()) return ::testing::AssertionFailure() << "keys differ";
  for (const auto& [key, t] : a) {
    auto r = bitwise_equal(t, b.at(key));
    if (!r) return r << " at " << key;
  }
  return ::testing::AssertionSuccess();
}

enum class Kind { kSGD, kAdamW };

std::unique_ptr<optim::Optimizer> make(Kind kind, std::vector<Tensor> ps, bool zero,
                                       std::shared_ptr<dist::ProcessGroup> group = nullptr) {
  if (kind == Kind::kSGD) {
    return std::make_unique<optim::SGD>(
        std::move(ps), optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01).zero_redundancy(zero).process_group(std::move(group)));
  }
  return std::make_unique<optim::AdamW>(
      std::move(ps), optim::AdamWOptions(1e-2).weight_decay(0.1).amsgrad(true).zero_redundancy(zero).process_group(std::move(group)));
}

/// Copies of `ps` that require grad (independent storages).
std::vector<Tensor> copies(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) {
    Tensor c = p.detach().clone();
    c.requires_grad_();
    out.push_back(c);
  }
  return out;
}

void steps(optim::Optimizer& opt, int first, int last) {
  for (int s = first; s <= last; ++s) {
    set_grads(opt.params(), s);
    opt.step();
  }
}

int64_t all_ranks_sum(int64_t v) {
  Tensor t = from_vector(std::vector<int64_t>{v});
  dist::all_reduce(t, dist::ReduceOp::kSum);
  return t.item<int64_t>();
}

/// Steps 1..last of both, the parameters compared bitwise after each.
void expect_steps_bitwise(optim::Optimizer& plain, optim::Optimizer& sharded, int last) {
  for (int s = 1; s <= last; ++s) {
    steps(plain, s, s);
    steps(sharded, s, s);
    for (size_t k = 0; k < shapes().size(); ++k) {
      EXPECT_TRUE(bitwise_equal(sharded.params()[k], plain.params()[k]))
          << "rank " << dist::get_rank() << " step " << s << " parameter " << k;
    }
  }
}

void check_steps(Kind kind) {
  auto plain = make(kind, make_params(), false);
  auto sharded = make(kind, make_params(), true);
  ASSERT_TRUE(sharded->zero_redundancy());
  EXPECT_EQ(sharded->process_group()->size(), dist::get_world_size());
  expect_steps_bitwise(*plain, *sharded, 5);
}

void check_state_bytes(Kind kind) {
  auto plain = make(kind, make_params(), false);
  auto sharded = make(kind, make_params(), true);
  steps(*plain, 1, 3);
  steps(*sharded, 1, 3);
  const int world = dist::get_world_size();
  const int64_t full = plain->state_nbytes();
  const int64_t mine = sharded->state_nbytes();
  ASSERT_GT(full, 0);
  // The shards partition the elements: together exactly the unsharded state.
  EXPECT_EQ(all_ranks_sum(mine), full);
  // One flat sequence per dtype, ceil(n / world) elements per rank and buffer.
  int64_t f32 = 0, f64 = 0;
  for (const auto& s : shapes()) (s.dtype == kFloat32 ? f32 : f64) += numel(s.shape);
  const int64_t buffers = kind == Kind::kSGD ? 1 : 3;  // exp_avg, exp_avg_sq, max_exp_avg_sq
  const int64_t bound = buffers * (((f32 + world - 1) / world) * 4 + ((f64 + world - 1) / world) * 8);
  EXPECT_LE(mine, bound) << "rank " << dist::get_rank();
  EXPECT_LE(double(mine), double(full) / world * 1.01 + 64);
  // A full state loaded into a sharded optimizer keeps only this rank's shard.
  auto loaded = make(kind, make_params(), true);
  loaded->load_state_dict(plain->state_dict());
  EXPECT_EQ(loaded->state_nbytes(), mine);
}

void check_consolidated(Kind kind) {
  auto plain = make(kind, make_params(), false);
  auto sharded = make(kind, make_params(), true);
  steps(*plain, 1, 4);
  steps(*sharded, 1, 4);
  const int rank = dist::get_rank(), world = dist::get_world_size();
  // Not consolidated yet: a ValueError that says what to do.
  try {
    (void)sharded->state_dict();
    ADD_FAILURE() << "state_dict() of an unconsolidated sharded optimizer did not throw";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("consolidate_state_dict"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sharded->consolidate_state_dict(world), ValueError);
  for (int to : {0, world - 1}) {
    sharded->consolidate_state_dict(to);
    if (rank == to) {
      EXPECT_TRUE(same_state(sharded->state_dict(), plain->state_dict())) << "to " << to;
    } else {
      EXPECT_THROW((void)sharded->state_dict(), ValueError);
    }
  }
  // A step makes the consolidated copy stale: it is dropped.
  steps(*sharded, 5, 5);
  EXPECT_THROW((void)sharded->state_dict(), ValueError);
}

void check_resume(Kind kind) {
  // The reference runs 3 steps, checkpoints (its state_dict is what a
  // consolidated sharded one is, by the test above), then 3 more.
  auto plain = make(kind, make_params(), false);
  steps(*plain, 1, 3);
  StateDict ckpt;  // owned copies: state_dict() hands out the live buffers
  for (const auto& [key, t] : plain->state_dict()) ckpt.insert(key, t.clone());
  const std::vector<Tensor> at3 = copies(plain->params());
  steps(*plain, 4, 6);

  // Sharded over the world, over a group of one rank (rank 0 alone), and
  // not at all; each resumes from the checkpoint.
  auto solo = dist::new_group({0});
  std::vector<std::unique_ptr<optim::Optimizer>> resumed;
  resumed.push_back(make(kind, copies(at3), true));
  if (dist::get_rank() == 0) resumed.push_back(make(kind, copies(at3), true, solo));
  resumed.push_back(make(kind, copies(at3), false));
  for (auto& opt : resumed) {
    opt->load_state_dict(ckpt);
    steps(*opt, 4, 6);
    for (size_t k = 0; k < shapes().size(); ++k) {
      EXPECT_TRUE(bitwise_equal(opt->params()[k], plain->params()[k])) << "parameter " << k;
    }
  }
  // And the world-sharded one consolidates to the reference's state.
  resumed[0]->consolidate_state_dict(0);
  if (dist::get_rank() == 0) {
    EXPECT_TRUE(same_state(resumed[0]->state_dict(), plain->state_dict()));
  }
  dist::destroy_process_group(solo);
}

/// Leaf parameters of `shapes` (float32 zeros).
std::vector<Tensor> params_of(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<Tensor> ps;
  for (const auto& s : shapes) ps.push_back(zeros(s).requires_grad_());
  return ps;
}

// ZeRO's partition assumes every rank lists the same parameters: a rank
// whose list differs (order, shape, count) fails construction on every rank,
// naming the first parameter that differs and each rank's side, and a
// non-contiguous parameter on one rank is a ValueError on every rank.
TEST(Zero, ParametersThatDifferAcrossRanksFailConstructionOnEveryRank) {
  const int W = dist::get_world_size(), last = W - 1;
  const bool odd = dist::get_rank() == last;
  auto adamw = [](std::vector<Tensor> ps) {
    optim::AdamW opt(std::move(ps), optim::AdamWOptions(1e-3).zero_redundancy(true));
  };
  auto sgd = [](std::vector<Tensor> ps) { optim::SGD opt(std::move(ps), optim::SGDOptions(0.1).zero_redundancy(true)); };
  // Parameter 1 transposed on the last rank (same count and numel).
  std::string msg = testing::error_message<DistributedError>([&] { adamw(params_of({{4}, odd ? std::vector<int64_t>{3, 5} : std::vector<int64_t>{5, 3}, {2}})); });
  EXPECT_NE(msg.find("parameter 1 differs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0 (3 parameters): float32 [5, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("rank {} (3 parameters): float32 [3, 5]", last)), std::string::npos) << msg;
  // One parameter fewer on the last rank.
  msg = testing::error_message<DistributedError>([&] { sgd(params_of(odd ? std::vector<std::vector<int64_t>>{{4}, {5, 3}} : std::vector<std::vector<int64_t>>{{4}, {5, 3}, {2}})); });
  EXPECT_NE(msg.find("parameter 2 differs"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("rank {} (2 parameters): none", last)), std::string::npos) << msg;
  // The same shapes in another dtype.
  std::vector<Tensor> typed = params_of({{4}, {5, 3}});
  if (odd) typed[0] = zeros({4}, kFloat64).requires_grad_();
  msg = testing::error_message<DistributedError>([&] { sgd(typed); });
  EXPECT_NE(msg.find("parameter 0 differs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float64 [4]"), std::string::npos) << msg;
  // A non-contiguous parameter on the last rank only.
  std::vector<Tensor> strided = params_of({{4}, {5, 3}});
  if (odd) strided[1] = zeros({3, 5}).t().requires_grad_();
  msg = testing::error_message<ValueError>([&] { adamw(strided); });
  EXPECT_NE(msg.find(fmt::format("parameter 1 (shape [5, 3]) is not, on rank {}", last)), std::string::npos) << msg;
  // Alike on every rank: constructs, and the group still works.
  adamw(params_of({{4}, {5, 3}}));
  Tensor one = ones({1});
  dist::all_reduce(one);
  EXPECT_EQ(one.item<float>(), float(W));
}

TEST(Zero, SGDShardedStepsAreBitwiseTheUnshardedOnEveryRank) { check_steps(Kind::kSGD); }
TEST(Zero, AdamWShardedStepsAreBitwiseTheUnshardedOnEveryRank) { check_steps(Kind::kAdamW); }
TEST(Zero, SGDEachRankAllocatesOnlyItsShardOfTheState) { check_state_bytes(Kind::kSGD); }
TEST(Zero, AdamWEachRankAllocatesOnlyItsShardOfTheState) { check_state_bytes(Kind::kAdamW); }
TEST(Zero, SGDConsolidatedStateDictIsTheUnshardedOneBitwise) { check_consolidated(Kind::kSGD); }
TEST(Zero, AdamWConsolidatedStateDictIsTheUnshardedOneBitwise) { check_consolidated(Kind::kAdamW); }
TEST(Zero, SGDFullStateLoadsIntoAnotherShardingAndContinuesBitwise) { check_resume(Kind::kSGD); }
TEST(Zero, AdamWFullStateLoadsIntoAnotherShardingAndContinuesBitwise) { check_resume(Kind::kAdamW); }

// Parameter groups shard as one flat sequence: each element is updated with
// its group's options, bitwise as unsharded; a group added before the first
// step recuts the shards (every rank adds it), one added later is refused.
TEST(Zero, ParameterGroupsShardBitwiseAndAddParamGroupRecutsBeforeAnyState) {
  auto make_grouped = [](std::vector<Tensor> ps, bool zero) {
    const size_t half = ps.size() / 2;
    std::vector<optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>(ps.begin(), ps.begin() + std::ptrdiff_t(half)),
                        std::make_unique<optim::AdamWOptions>(optim::AdamWOptions(3e-2).weight_decay(0.0)));
    auto opt = std::make_unique<optim::AdamW>(groups, optim::AdamWOptions(1e-2).weight_decay(0.1).zero_redundancy(zero));
    opt->add_param_group(optim::OptimizerParamGroup(std::vector<Tensor>(ps.begin() + std::ptrdiff_t(half), ps.end())));
    return opt;
  };
  auto plain = make_grouped(make_params(), false);
  auto sharded = make_grouped(make_params(), true);
  ASSERT_EQ(sharded->param_groups().size(), 2u);
  expect_steps_bitwise(*plain, *sharded, 3);
  sharded->consolidate_state_dict(0);
  if (dist::get_rank() == 0) EXPECT_TRUE(same_state(sharded->state_dict(), plain->state_dict()));
  std::vector<Tensor> late = params_of({{3}});
  EXPECT_THROW(sharded->add_param_group(optim::OptimizerParamGroup(late)), ValueError);
  EXPECT_EQ(sharded->param_groups().size(), 2u);
}

}  // namespace
}  // namespace dtr
