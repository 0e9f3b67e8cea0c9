// Note [thrash guard]: a budget under which the program keeps rebuilding
// what it just evicted becomes a ThrashError naming the budget and the ops
// replayed, instead of a run that never ends; with the guard off (or a
// budget that fits) the same program gives the unlimited run's values.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/options.h"
#include "dtr/dtr.h"

namespace dtr {
namespace {

struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> b) { remat::set_memory_budget(b); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};
struct ThrashLimitScope {
  explicit ThrashLimitScope(double limit) : saved(remat::Runtime::global().thrash_limit()) {
    remat::Runtime::global().set_thrash_limit(limit);
  }
  ~ThrashLimitScope() { remat::Runtime::global().set_thrash_limit(saved); }
  double saved;
};

constexpr int64_t kLinks = 300;
constexpr int64_t kElems = 4096;  // 16 KiB per link

// A chain x[i+1] = x[i] * 1.001 + 0.5 of kLinks links, every link kept by
// handle, then read newest-first: under a budget of a few links, each read
// rebuilds its link from the nearest resident ancestor, whose copies the
// next reads evict again: quadratic replays for linear work. Returns the
// sum of the reads.
double reverse_reads(std::optional<int64_t> budget) {
  NoGradGuard ng;
  BudgetScope scope(budget);
  std::vector<Tensor> x;
  x.push_back(from_vector(std::vector<float>(size_t(kElems), 1.0f), {kElems}));
  for (int64_t i = 0; i < kLinks; ++i) x.push_back(x.back() * 1.001 + 0.5);
  double total = 0;
  for (int64_t i = kLinks; i >= 1; --i) total += double(x[size_t(i)].sum().item<float>());
  return total;
}

TEST(ThrashGuard, QuadraticReplaysRaiseThrashError) {
  const double expected = reverse_reads(std::nullopt);
  ThrashLimitScope limit(4);
  remat::reset_stats();
  const int64_t budget = 4 * kElems * int64_t(sizeof(float));
  try {
    reverse_reads(budget);
    FAIL() << "expected a ThrashError under a budget of " << budget << " bytes; replays " << remat::stats().recomputed_ops << " evictions " << remat::stats().evictions << " ratio " << remat::stats().max_replay_ratio << " fresh " << remat::stats().fresh_ops;
  } catch (const ThrashError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("thrashing under the budget of cpu"), std::string::npos) << what;
    EXPECT_NE(what.find("DTR_THRASH_LIMIT"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(budget)), std::string::npos) << what;
    EXPECT_NE(what.find("'mul_scalar'"), std::string::npos) << what;  // replayed most
    EXPECT_NE(what.find("raise DTR_MEMORY_BUDGET"), std::string::npos) << what;
  }
  EXPECT_GT(remat::stats().max_replay_ratio, 4.0);
  // A ThrashError is an OutOfMemoryError; the runtime goes on, and the same
  // program under no budget (or the guard off) gives the unlimited values.
  EXPECT_EQ(reverse_reads(std::nullopt), expected);
  {
    ThrashLimitScope off(0);
    const double got = reverse_reads(budget);
    EXPECT_EQ(std::memcmp(&got, &expected, sizeof got), 0);
    EXPECT_GT(remat::stats().recomputed_ops, 10 * kLinks);  // it did thrash
  }
}

TEST(ThrashGuard, IsAnOutOfMemoryError) {
  ThrashLimitScope limit(4);
  EXPECT_THROW(reverse_reads(4 * kElems * int64_t(sizeof(float))), OutOfMemoryError);
}

TEST(ThrashGuard, AFittingBudgetNeverTrips) {
  // Room for half the chain: reads replay, but linearly, far under the limit.
  const double expected = reverse_reads(std::nullopt);
  ThrashLimitScope limit(2);
  remat::reset_stats();
  const double got = reverse_reads((kLinks / 2) * kElems * int64_t(sizeof(float)));
  EXPECT_EQ(std::memcmp(&got, &expected, sizeof got), 0);
  EXPECT_LT(remat::stats().max_replay_ratio, 2.0);
}

TEST(ThrashGuard, LimitIsZeroOrAtLeastOne) {
  remat::Runtime& rt = remat::Runtime::global();
  const double saved = rt.thrash_limit();
  EXPECT_THROW(rt.set_thrash_limit(0.5), ValueError);
  EXPECT_THROW(rt.set_thrash_limit(-1), ValueError);
  EXPECT_THROW(rt.set_thrash_limit(std::numeric_limits<double>::infinity()), ValueError);
  EXPECT_EQ(rt.thrash_limit(), saved);  // a refused limit changes nothing
  EXPECT_DOUBLE_EQ(*parse_thrash_limit("32"), 32.0);
  EXPECT_DOUBLE_EQ(*parse_thrash_limit(" 0 "), 0.0);
  EXPECT_DOUBLE_EQ(*parse_thrash_limit("1.5"), 1.5);
  for (const char* bad : {"", "0.5", "-2", "inf", "nan", "lots"}) EXPECT_FALSE(parse_thrash_limit(bad).ok()) << bad;
  Options o;
  set_option(o, "DTR_THRASH_LIMIT", "100");
  EXPECT_DOUBLE_EQ(o.thrash_limit, 100.0);
  EXPECT_THROW(set_option(o, "DTR_THRASH_LIMIT", "0.1"), ValueError);
}

}  // namespace
}  // namespace dtr
