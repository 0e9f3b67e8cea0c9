#include "eager/data.h"

#include <array>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/philox.h"
#include "eager/distributed/distributed.h"

namespace dtr::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size),
      num_replicas_(options.num_replicas ? *options.num_replicas : distributed::get_world_size()),
      rank_(options.rank ? *options.rank : distributed::get_rank()),
      shuffle_(options.shuffle),
      seed_(options.seed),
      drop_last_(options.drop_last) {
  DTR_CHECK(dataset_size_ >= 0, ValueError, "DistributedSampler: dataset_size must be non-negative, got {}",
            dataset_size_);
  DTR_CHECK(num_replicas_ >= 1, ValueError, "DistributedSampler: num_replicas must be at least 1, got {}",
            num_replicas_);
  DTR_CHECK(rank_ >= 0 && rank_ < num_replicas_, ValueError,
            "DistributedSampler: invalid rank {}, rank should be in the interval [0, {}]", rank_,
            num_replicas_ - 1);
  num_samples_ = drop_last_ ? dataset_size_ / num_replicas_ : (dataset_size_ + num_replicas_ - 1) / num_replicas_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(dataset_size_));
  std::iota(all.begin(), all.end(), int64_t(0));
  if (shuffle_) {
    // Fisher–Yates from the top, one 64-bit draw per swap: draw k is the
    // first two words of Philox block k under key seed + epoch. The modulo's
    // bias is below n / 2^64.
    const uint64_t key = seed_ + uint64_t(epoch_);
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      const std::array<uint32_t, 4> r = philox4x32_10(key, uint64_t(dataset_size_ - 1 - i));
      const uint64_t draw = (uint64_t(r[1]) << 32) | r[0];
      std::swap(all[size_t(i)], all[size_t(draw % uint64_t(i + 1))]);
    }
  }
  const int64_t total = total_size();
  // Pad by repeating the start of the list, or cut the tail.
  for (int64_t i = dataset_size_; i < total; ++i) all.push_back(all[size_t(i % dataset_size_)]);
  all.resize(size_t(total));
  std::vector<int64_t> mine;
  mine.reserve(size_t(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[size_t(i)]);
  return mine;
}

}  // namespace dtr::data
