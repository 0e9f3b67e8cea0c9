// Data utilities (torch::data): datasets (Dataset, MapDataset, MNIST),
// transforms (Normalize, Stack, Lambda), samplers (Sequential, Random) and
// make_data_loader, in eager/data/; and which examples of a dataset each rank
// of a data-parallel job reads:
//
//   dtr::data::DistributedSampler sampler(n, {.shuffle = true, .seed = 42});
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     sampler.set_epoch(epoch);
//     for (int64_t i : sampler.indices()) { ... example i ... }
//   }
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "eager/data/dataloader.h"
#include "eager/data/datasets.h"
#include "eager/data/example.h"
#include "eager/data/samplers.h"
#include "eager/data/transforms.h"

namespace dtr::data {

/// Options of DistributedSampler (the keyword arguments of PyTorch's).
struct DistributedSamplerOptions {
  /// Ranks the dataset is split over; unset: distributed::get_world_size().
  std::optional<int64_t> num_replicas;
  /// This process's rank among them; unset: distributed::get_rank().
  std::optional<int64_t> rank;
  /// Permute the indices each epoch (from `seed` + the epoch).
  bool shuffle = true;
  uint64_t seed = 0;
  /// Drop the tail that does not divide evenly instead of padding it.
  bool drop_last = false;
};

/// torch.utils.data.distributed.DistributedSampler over the indices
/// 0 .. dataset_size−1: every rank gets num_samples() indices, rank r those
/// at positions r, r + num_replicas, r + 2·num_replicas, ... of the epoch's
/// list. The list is the identity, or with `shuffle` a permutation drawn
/// from `seed` + epoch (Fisher–Yates over dtr's Philox4x32-10 stream keyed
/// by seed + epoch: deterministic and alike on every rank, but not the
/// permutation torch.randperm draws for the same seed). Without
/// `drop_last` the list is padded to num_replicas·ceil(n / num_replicas) by
/// repeating its start (as often as needed), so some indices are read twice;
/// with it, cut to num_replicas·floor(n / num_replicas), so some are not read.
class DistributedSampler {
 public:
  /// Throws ValueError for dataset_size < 0, num_replicas < 1 or a rank
  /// outside [0, num_replicas); DistributedError when num_replicas or rank is
  /// unset and no process group is initialized.
  explicit DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options = {});

  /// Sets the epoch the next indices() permutes for (DistributedSampler.set_epoch).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  /// This rank's indices for the current epoch, num_samples() of them
  /// (iter(sampler)).
  std::vector<int64_t> indices() const;
  /// Indices per rank (len(sampler)).
  int64_t num_samples() const { return num_samples_; }
  /// Indices over all ranks: num_samples() · num_replicas().
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }
  int64_t dataset_size() const { return dataset_size_; }

 private:
  int64_t dataset_size_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace dtr::data
