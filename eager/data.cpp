#include "eager/data.h"

#include <numeric>
#include <utility>

#include "core/error.h"
#include "eager/data/samplers.h"
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
  if (shuffle_) samplers::detail::shuffle_in_place(all.data(), all.size(), seed_ + uint64_t(epoch_), 0);
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
