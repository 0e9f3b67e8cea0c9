// dtr::data::DistributedSampler against PyTorch's
// torch.utils.data.distributed.DistributedSampler semantics: the split of
// the indices over ranks, padding and drop_last, the permutation per epoch.
#include <algorithm>
#include <map>
#include <set>

#include "dtr/dtr.h"
#include "eager/distributed/distributed.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using data::DistributedSampler;
using data::DistributedSamplerOptions;

/// Every rank's indices, rank by rank.
std::vector<std::vector<int64_t>> all_ranks(int64_t n, int64_t world, DistributedSamplerOptions o,
                                            int64_t epoch = 0) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t r = 0; r < world; ++r) {
    o.num_replicas = world;
    o.rank = r;
    DistributedSampler s(n, o);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

/// The epoch's list as the ranks interleave it: position r + k·world is
/// rank r's k-th index.
std::vector<int64_t> interleave(const std::vector<std::vector<int64_t>>& ranks) {
  std::vector<int64_t> list;
  for (size_t k = 0; k < ranks[0].size(); ++k) {
    for (const auto& r : ranks) list.push_back(r[k]);
  }
  return list;
}

TEST(DistributedSampler, WithoutShuffleRankRTakesEveryWorldthIndexAndPadsFromTheStart) {
  // PyTorch: DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False).
  const auto padded = all_ranks(10, 3, {.shuffle = false});
  EXPECT_EQ(padded[0], (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(padded[1], (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(padded[2], (std::vector<int64_t>{2, 5, 8, 1}));
  const auto dropped = all_ranks(10, 3, {.shuffle = false, .drop_last = true});
  EXPECT_EQ(dropped[0], (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(dropped[1], (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(dropped[2], (std::vector<int64_t>{2, 5, 8}));
  // Padding longer than the dataset repeats it as often as needed.
  const auto tiny = all_ranks(2, 5, {.shuffle = false});
  EXPECT_EQ(interleave(tiny), (std::vector<int64_t>{0, 1, 0, 1, 0}));
}

TEST(DistributedSampler, EveryIndexIsCoveredExactlyOnceOverTheRanks) {
  for (int64_t n : {0, 1, 7, 12, 100, 101}) {
    for (int64_t world : {1, 2, 3, 4}) {
      for (bool shuffle : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " world " << world << " shuffle " << shuffle);
        // drop_last false: each index at least once, total_size in all, the
        // repeats being the start of the epoch's list.
        const auto padded = all_ranks(n, world, {.shuffle = shuffle, .seed = 7}, 3);
        const int64_t per_rank = (n + world - 1) / world;
        std::map<int64_t, int> count;
        for (const auto& r : padded) {
          EXPECT_EQ(int64_t(r.size()), per_rank);
          for (int64_t i : r) ++count[i];
        }
        EXPECT_EQ(int64_t(count.size()), n);
        const std::vector<int64_t> list = interleave(padded);
        for (int64_t i = 0; i < n; ++i) EXPECT_GE(count[i], 1) << i;
        for (int64_t i = n; i < int64_t(list.size()); ++i) EXPECT_EQ(list[size_t(i)], list[size_t(i % n)]);
        if (n >= world) {
          for (const auto& [i, c] : count) EXPECT_LE(c, 2) << i;
        }
        // drop_last true: no index twice, floor(n / world) per rank.
        const auto dropped = all_ranks(n, world, {.shuffle = shuffle, .seed = 7, .drop_last = true}, 3);
        std::set<int64_t> seen;
        for (const auto& r : dropped) {
          EXPECT_EQ(int64_t(r.size()), n / world);
          for (int64_t i : r) {
            EXPECT_TRUE(i >= 0 && i < n) << i;
            EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice";
          }
        }
        EXPECT_EQ(int64_t(seen.size()), n / world * world);
      }
    }
  }
}

TEST(DistributedSampler, ShuffleIsAPermutationFixedBySeedAndEpoch) {
  const int64_t n = 50;
  const auto a = interleave(all_ranks(n, 2, {.seed = 11}, 0));
  // One permutation of 0..n-1, the same whichever rank computes it.
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) identity[size_t(i)] = i;
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(a, identity);
  // Deterministic: the same seed and epoch give the same list, in a new
  // sampler or after switching epochs back.
  EXPECT_EQ(interleave(all_ranks(n, 2, {.seed = 11}, 0)), a);
  DistributedSampler s(n, {.num_replicas = 2, .rank = 0, .seed = 11});
  const std::vector<int64_t> epoch0 = s.indices();
  s.set_epoch(1);
  const std::vector<int64_t> epoch1 = s.indices();
  EXPECT_NE(epoch0, epoch1);
  s.set_epoch(0);
  EXPECT_EQ(s.indices(), epoch0);
  EXPECT_EQ(s.epoch(), 0);
  // Another seed, another permutation; seed + epoch is what counts (as in
  // PyTorch, whose generator is seeded with seed + epoch).
  EXPECT_NE(interleave(all_ranks(n, 2, {.seed = 12}, 0)), a);
  EXPECT_EQ(interleave(all_ranks(n, 2, {.seed = 12}, 0)), interleave(all_ranks(n, 2, {.seed = 11}, 1)));
  // Another world size splits the same list differently.
  EXPECT_EQ(interleave(all_ranks(n, 5, {.seed = 11}, 0)), a);
}

TEST(DistributedSampler, SizesAndBadArguments) {
  DistributedSampler s(10, {.num_replicas = 4, .rank = 3});
  EXPECT_EQ(s.num_samples(), 3);
  EXPECT_EQ(s.total_size(), 12);
  EXPECT_EQ(s.num_replicas(), 4);
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.dataset_size(), 10);
  DistributedSampler d(10, {.num_replicas = 4, .rank = 3, .drop_last = true});
  EXPECT_EQ(d.num_samples(), 2);
  EXPECT_EQ(d.total_size(), 8);

  auto bad = [](int64_t n, int64_t world, int64_t rank) {
    return testing::error_message<ValueError>([&] { DistributedSampler(n, {.num_replicas = world, .rank = rank}); });
  };
  EXPECT_NE(bad(10, 2, 2).find("invalid rank 2, rank should be in the interval [0, 1]"), std::string::npos)
      << bad(10, 2, 2);
  EXPECT_NE(bad(10, 2, -1).find("invalid rank -1"), std::string::npos);
  EXPECT_NE(bad(10, 0, 0).find("num_replicas must be at least 1"), std::string::npos);
  EXPECT_NE(bad(-1, 1, 0).find("dataset_size must be non-negative"), std::string::npos);
  if (!distributed::is_initialized()) {
    // Rank and world size default to the process group's.
    EXPECT_THROW(DistributedSampler(10, {}), DistributedError);
  }
}

}  // namespace
}  // namespace dtr
