// torch::data::make_data_loader: batches of a dataset in a sampler's order.
//
//   auto loader = dtr::data::make_data_loader<dtr::data::samplers::SequentialSampler>(
//       std::move(dataset), dtr::data::DataLoaderOptions().batch_size(64));
//   for (auto& batch : *loader) { ... batch.data, batch.target ... }
//
// Batches are read in the calling thread, when the iterator advances:
// DataLoaderOptions::workers (and max_jobs, timeout, enforce_ordering, which
// only matter to worker threads) are kept for libtorch's signature and change
// nothing; the batches and their order are those of workers(0).
#pragma once

#include <chrono>
#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "eager/data/samplers.h"

namespace dtr::data {

/// torch::data::DataLoaderOptions, with libtorch's chained setters
/// (`DataLoaderOptions().batch_size(64).drop_last(true)`); a batch size
/// converts to it, so `make_data_loader(ds, 64)` reads batches of 64.
class DataLoaderOptions {
 public:
  DataLoaderOptions() = default;
  DataLoaderOptions(size_t batch_size) : batch_size_(batch_size) {}  // NOLINT: implicit like libtorch's

#define DTR_DATA_OPTION(T, name)                       \
  DataLoaderOptions& name(const T& value) {            \
    name##_ = value;                                   \
    return *this;                                      \
  }                                                    \
  const T& name() const noexcept { return name##_; }   \
  T& name() noexcept { return name##_; }
  /// Examples per batch (default 1).
  DTR_DATA_OPTION(size_t, batch_size)
  /// Worker threads in libtorch; accepted and ignored here (see the top).
  DTR_DATA_OPTION(size_t, workers)
  DTR_DATA_OPTION(std::optional<size_t>, max_jobs)
  DTR_DATA_OPTION(std::optional<std::chrono::milliseconds>, timeout)
  DTR_DATA_OPTION(bool, enforce_ordering)
  /// Leave out the last batch of an epoch when it has fewer than batch_size
  /// examples.
  DTR_DATA_OPTION(bool, drop_last)
#undef DTR_DATA_OPTION

 private:
  size_t batch_size_ = 1;
  size_t workers_ = 0;
  std::optional<size_t> max_jobs_;
  std::optional<std::chrono::milliseconds> timeout_;
  bool enforce_ordering_ = true;
  bool drop_last_ = false;
};

/// torch::data::StatelessDataLoader: iterating it (begin()) starts an epoch
/// — the sampler is reset — and each step reads the dataset's get_batch of
/// the sampler's next request; the epoch ends when the sampler is done (or,
/// with drop_last, at its first short request). A batch is the dataset's
/// BatchType: a std::vector<Example<>> for a plain Dataset, one Example<>
/// of stacked tensors after map(transforms::Stack<>()).
template <typename Dataset, typename Sampler>
class StatelessDataLoader {
 public:
  using BatchType = typename Dataset::BatchType;
  using BatchRequestType = typename Sampler::BatchRequestType;

  /// Input iterator over one epoch's batches; equal to end() once done.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = BatchType;
    using difference_type = std::ptrdiff_t;
    using pointer = BatchType*;
    using reference = BatchType&;

    Iterator() = default;
    BatchType& operator*() {
      DTR_CHECK(batch_.has_value(), IndexError, "DataLoader: dereferenced the end iterator");
      return *batch_;
    }
    BatchType* operator->() { return &**this; }
    Iterator& operator++() {
      DTR_CHECK(batch_.has_value(), IndexError, "DataLoader: incremented the end iterator");
      batch_ = loader_->next_batch();
      return *this;
    }
    void operator++(int) { ++*this; }
    /// Iterators compare equal when both are past the end.
    bool operator==(const Iterator& other) const { return !batch_ && !other.batch_; }

   private:
    friend class StatelessDataLoader;
    Iterator(StatelessDataLoader* loader, std::optional<BatchType> batch)
        : loader_(loader), batch_(std::move(batch)) {}
    StatelessDataLoader* loader_ = nullptr;
    std::optional<BatchType> batch_;
  };

  /// Throws ValueError for a batch size of 0.
  StatelessDataLoader(Dataset dataset, Sampler sampler, DataLoaderOptions options)
      : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(std::move(options)) {
    DTR_CHECK(options_.batch_size() > 0, ValueError, "DataLoader: batch_size must be positive, got 0");
  }

  /// Starts a new epoch: resets the sampler and reads the first batch.
  Iterator begin() {
    sampler_.reset();
    return Iterator(this, next_batch());
  }
  Iterator end() { return Iterator(); }
  /// libtorch joins its worker threads; there are none.
  void join() {}
  const DataLoaderOptions& options() const noexcept { return options_; }

 private:
  std::optional<BatchType> next_batch() {
    std::optional<BatchRequestType> request = sampler_.next(options_.batch_size());
    if (!request || request->empty()) return std::nullopt;
    if (options_.drop_last() && request->size() < options_.batch_size()) return std::nullopt;
    return dataset_.get_batch(std::move(*request));
  }

  Dataset dataset_;
  Sampler sampler_;
  DataLoaderOptions options_;
};

/// torch::data::make_data_loader(dataset, sampler, options).
template <typename Dataset, typename Sampler,
          typename = std::enable_if_t<std::is_base_of_v<samplers::Sampler<typename Sampler::BatchRequestType>, Sampler>>>
std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(Dataset dataset, Sampler sampler,
                                                                          DataLoaderOptions options = {}) {
  return std::make_unique<StatelessDataLoader<Dataset, Sampler>>(std::move(dataset), std::move(sampler),
                                                                 std::move(options));
}

/// torch::data::make_data_loader<Sampler = RandomSampler>(dataset, options):
/// the sampler is built over the dataset's size(). Throws ValueError when
/// the dataset's size() is nullopt.
template <typename Sampler = samplers::RandomSampler, typename Dataset>
std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(Dataset dataset,
                                                                          DataLoaderOptions options = {}) {
  const std::optional<size_t> size = dataset.size();
  DTR_CHECK(size.has_value(), ValueError,
            "make_data_loader: the dataset's size() is unknown (nullopt); pass a sampler built for it");
  Sampler sampler(*size);
  return make_data_loader(std::move(dataset), std::move(sampler), std::move(options));
}

}  // namespace dtr::data
