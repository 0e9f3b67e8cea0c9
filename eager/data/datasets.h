// torch::data::datasets: random-access datasets (get(i), size()), the
// MapDataset that Dataset::map builds, and MNIST read from IDX files.
//
//   struct Squares : dtr::data::datasets::Dataset<Squares> {
//     dtr::data::Example<> get(size_t i) override { ... }
//     std::optional<size_t> size() const override { return 100; }
//   };
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "eager/data/example.h"
#include "eager/tensor.h"

namespace dtr::data::datasets {

template <typename Source, typename Transform>
class MapDataset;

/// torch::data::datasets::BatchDataset: a dataset read a batch at a time.
/// get_batch(indices) returns the batch of those examples; size() their
/// number (nullopt: unknown, which a data loader refuses). map(t) wraps the
/// dataset in a MapDataset that applies the transform t to every batch (on
/// an rvalue the dataset moves in, on an lvalue it is copied).
template <typename Self, typename Batch, typename BatchRequest = std::vector<size_t>>
class BatchDataset {
 public:
  using SelfType = Self;
  using BatchType = Batch;
  using BatchRequestType = BatchRequest;
  static constexpr bool is_stateful = false;

  virtual ~BatchDataset() = default;
  virtual Batch get_batch(BatchRequest request) = 0;
  virtual std::optional<size_t> size() const = 0;

  template <typename TransformType>
  MapDataset<Self, TransformType> map(TransformType transform) & {
    return MapDataset<Self, TransformType>(static_cast<Self&>(*this), std::move(transform));
  }
  template <typename TransformType>
  MapDataset<Self, TransformType> map(TransformType transform) && {
    return MapDataset<Self, TransformType>(std::move(static_cast<Self&>(*this)), std::move(transform));
  }
};

/// torch::data::datasets::Dataset<Self, Example>: a dataset read an example
/// at a time: get(i) for i in [0, size()); its batches are std::vectors of
/// examples, one get per index.
template <typename Self, typename SingleExample = Example<>>
class Dataset : public BatchDataset<Self, std::vector<SingleExample>> {
 public:
  using ExampleType = SingleExample;

  virtual ExampleType get(size_t index) = 0;

  std::vector<ExampleType> get_batch(std::vector<size_t> indices) override {
    std::vector<ExampleType> batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(get(i));
    return batch;
  }
};

/// torch::data::datasets::MapDataset: `source` with `transform` applied to
/// each of its batches (transform.apply_batch(source.get_batch(indices))).
/// Built by Dataset::map; map again to chain transforms.
template <typename Source, typename Transform>
class MapDataset : public BatchDataset<MapDataset<Source, Transform>, typename Transform::OutputBatchType,
                                       typename Source::BatchRequestType> {
 public:
  using DatasetType = Source;
  using TransformType = Transform;
  using BatchType = typename Transform::OutputBatchType;
  using BatchRequestType = typename Source::BatchRequestType;

  MapDataset(Source dataset, Transform transform)
      : dataset_(std::move(dataset)), transform_(std::move(transform)) {}

  BatchType get_batch(BatchRequestType request) override {
    return transform_.apply_batch(dataset_.get_batch(std::move(request)));
  }
  std::optional<size_t> size() const override { return dataset_.size(); }

  const Source& dataset() const noexcept { return dataset_; }
  const Transform& transform() const noexcept { return transform_; }

 private:
  Source dataset_;
  Transform transform_;
};

/// torch::data::datasets::MNIST: the MNIST (or Fashion-MNIST, same format)
/// images and labels of one split, read whole at construction from the IDX
/// files in `root`: train-images-idx3-ubyte and train-labels-idx1-ubyte
/// (Mode::kTrain, 60000 examples) or t10k-images-idx3-ubyte and
/// t10k-labels-idx1-ubyte (Mode::kTest, 10000), each either as named or
/// gzip-compressed with ".gz" appended (as Debian's dataset-fashion-mnist
/// ships them in /usr/share/datasets/fashion-mnist). images() is float32
/// (N, 1, 28, 28) with the bytes scaled to [0, 1] (byte / 255), targets()
/// int64 (N); get(i) is {images()[i], targets()[i]}: (1, 28, 28) and ().
/// Throws ValueError naming the file when one is missing or unreadable, not
/// an IDX file of the expected kind (magic number 2051 for images, 2049 for
/// labels), not 28×28 images, shorter than its header says, or when the two
/// files' counts differ; IndexError from get for an index ≥ size().
class MNIST : public Dataset<MNIST> {
 public:
  enum class Mode { kTrain, kTest };

  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain);

  Example<> get(size_t index) override;
  std::optional<size_t> size() const override;
  bool is_train() const noexcept { return is_train_; }
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor images_, targets_;
  bool is_train_;
};

/// One IDX file read whole: its dimensions and its bytes, row-major.
/// Exposed for the tests and for programs that read other IDX files.
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<unsigned char> bytes;
};

/// Reads the unsigned-byte IDX file at `path` (plain, or gzip-compressed:
/// zlib reads both), requiring `ndims` dimensions (magic 0x0000080N), and
/// keeping only its first `limit` items along dimension 0 (0: all; dims[0]
/// says how many were kept). Throws ValueError naming the path for a missing
/// or unreadable file, a wrong magic number, or fewer data bytes than the
/// header's dimensions need.
IdxFile read_idx_ubyte(const std::string& path, int ndims, int64_t limit = 0);

}  // namespace dtr::data::datasets
