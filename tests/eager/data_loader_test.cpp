// torch::data as dtr::data: datasets::MNIST against the Fashion-MNIST files
// of Debian's dataset-fashion-mnist package (values computed independently
// by reading the same files with Python's gzip and struct), its errors on
// made-up IDX files, Normalize/Stack/Lambda, the samplers and the data
// loader's batches.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

namespace fs = std::filesystem;
using data::Example;
using data::datasets::MNIST;
using testing::throws_with;

constexpr const char* kFashion = "/usr/share/datasets/fashion-mnist";

bool have_fashion() { return fs::exists(fs::path(kFashion) / "train-images-idx3-ubyte.gz"); }
#define REQUIRE_FASHION()                                                                                 \
  ASSERT_TRUE(have_fashion()) << kFashion << " is missing: ./dtr.sh setup installs Debian's "             \
                                             "dataset-fashion-mnist package, which these tests read"

/// A 0-dimensional int64 tensor, as MNIST's targets are one by one.
Tensor label(int64_t v) { return full(IntList{}, v, kInt64); }

/// Sum of image i's bytes: its float pixels × 255, rounded.
int64_t byte_sum(const Tensor& images, int64_t i) {
  return int64_t(std::llround(images[i].sum().item<double>() * 255.0));
}

// ---- MNIST over the real files ------------------------------------------------------

TEST(DataMnist, ReadsTheTrainSplitFromGzipFiles) {
  REQUIRE_FASHION();
  MNIST train(kFashion);
  EXPECT_TRUE(train.is_train());
  ASSERT_EQ(train.size().value(), 60000u);
  EXPECT_EQ(train.images().shape(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(train.images().dtype(), kFloat32);
  EXPECT_EQ(train.targets().shape(), (Shape{60000}));
  EXPECT_EQ(train.targets().dtype(), kInt64);
  // Python: labels[:10] and sum(labels) of train-labels-idx1-ubyte.gz.
  EXPECT_EQ(train.targets().slice(0, 0, 10).to_vector<int64_t>(),
            (std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(train.targets().sum().item<int64_t>(), 270000);
  // Python: sum of image i's 784 bytes; the byte at row 14, column 14.
  EXPECT_EQ(byte_sum(train.images(), 0), 76247);
  EXPECT_EQ(byte_sum(train.images(), 1), 84598);
  EXPECT_EQ(byte_sum(train.images(), 59999), 16684);
  EXPECT_FLOAT_EQ(train.images()[0][0][14][14].item<float>(), 217.0f / 255.0f);
  EXPECT_FLOAT_EQ(train.images().max().item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(train.images().amin().item<float>(), 0.0f);

  Example<> e = train.get(1);
  EXPECT_EQ(e.data.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<int64_t>(), 0);
  EXPECT_FLOAT_EQ(e.data[0][14][14].item<float>(), 204.0f / 255.0f);
  EXPECT_TRUE(throws_with<IndexError>([&] { train.get(60000); }, {"60000", "out of range"}));
}

TEST(DataMnist, ReadsTheTestSplit) {
  REQUIRE_FASHION();
  MNIST test(kFashion, MNIST::Mode::kTest);
  EXPECT_FALSE(test.is_train());
  ASSERT_EQ(test.size().value(), 10000u);
  EXPECT_EQ(test.targets().slice(0, 0, 10).to_vector<int64_t>(),
            (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  EXPECT_EQ(test.targets().sum().item<int64_t>(), 45000);
  EXPECT_EQ(byte_sum(test.images(), 0), 33456);
  EXPECT_EQ(byte_sum(test.images(), 1), 100994);
  EXPECT_EQ(byte_sum(test.images(), 9999), 24390);
  EXPECT_FLOAT_EQ(test.images()[9999][0][14][14].item<float>(), 132.0f / 255.0f);
}

// ---- MNIST over made-up files ---------------------------------------------------------

/// A fresh folder under the system's temp folder, removed at the end.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("dtr-data-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void put_u32(std::string* s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s->push_back(char((v >> shift) & 0xff));
}

/// An IDX file of unsigned bytes: magic 0x0800 | dims.size(), the dims, then
/// `bytes` (which may be shorter or longer than the dims say).
void write_idx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
               const std::vector<unsigned char>& bytes) {
  std::string s;
  put_u32(&s, magic);
  for (uint32_t d : dims) put_u32(&s, d);
  s.append(bytes.begin(), bytes.end());
  std::ofstream(path, std::ios::binary) << s;
}

/// Three 28×28 images, image i's pixel p = (p + 40·i) mod 256, labels 4, 7, 1.
void write_small_split(const TempDir& dir, const std::string& prefix) {
  std::vector<unsigned char> pixels(3 * 784);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = (unsigned char)((i % 784 + 40 * (i / 784)) % 256);
  write_idx(dir.file(prefix + "-images-idx3-ubyte"), 2051, {3, 28, 28}, pixels);
  write_idx(dir.file(prefix + "-labels-idx1-ubyte"), 2049, {3}, {4, 7, 1});
}

TEST(DataMnist, ReadsUncompressedFiles) {
  TempDir dir;
  write_small_split(dir, "t10k");
  MNIST m(dir.str(), MNIST::Mode::kTest);
  ASSERT_EQ(m.size().value(), 3u);
  EXPECT_EQ(m.targets().to_vector<int64_t>(), (std::vector<int64_t>{4, 7, 1}));
  EXPECT_FLOAT_EQ(m.images()[1][0][0][0].item<float>(), 40.0f / 255.0f);
  EXPECT_FLOAT_EQ(m.images()[2][0][1][3].item<float>(), float((28 + 3 + 80) % 256) / 255.0f);
  EXPECT_FLOAT_EQ(m.images()[0][0][9][3].item<float>(), float((9 * 28 + 3) % 256) / 255.0f);
}

TEST(DataMnist, ReadIdxKeepsTheFirstItemsUpToALimit) {
  TempDir dir;
  write_small_split(dir, "train");
  const data::datasets::IdxFile two = data::datasets::read_idx_ubyte(dir.file("train-images-idx3-ubyte"), 3, 2);
  EXPECT_EQ(two.dims, (std::vector<int64_t>{2, 28, 28}));
  ASSERT_EQ(two.bytes.size(), 2u * 784u);
  EXPECT_EQ(two.bytes[784], 40);
  EXPECT_EQ(data::datasets::read_idx_ubyte(dir.file("train-labels-idx1-ubyte"), 1, 10).bytes,
            (std::vector<unsigned char>{4, 7, 1}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] { data::datasets::read_idx_ubyte(dir.file("train-labels-idx1-ubyte"), 1, -1); }, {"limit"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { data::datasets::read_idx_ubyte(dir.str(), 1); }, {"directory"}));
}

TEST(DataMnist, MissingFilesNameBothForms) {
  TempDir dir;
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); },
                                      {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz", "dataset-fashion-mnist"}));
  write_small_split(dir, "train");
  fs::remove(dir.file("train-labels-idx1-ubyte"));
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); }, {"train-labels-idx1-ubyte.gz"}));
}

TEST(DataMnist, BadMagicNumbers) {
  TempDir dir;
  write_small_split(dir, "train");
  // The labels' magic where the images' belongs: a 1-dimension file.
  write_idx(dir.file("train-images-idx3-ubyte"), 2049, {3}, {1, 2, 3});
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); },
                                      {"train-images-idx3-ubyte", "magic number 2049", "expected 2051"}));
  write_small_split(dir, "train");
  write_idx(dir.file("train-labels-idx1-ubyte"), 0x0d01, {3}, {1, 2, 3});  // float elements
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); }, {"train-labels-idx1-ubyte", "expected 2049"}));
}

TEST(DataMnist, TruncatedFiles) {
  TempDir dir;
  write_small_split(dir, "train");
  // The header says three images; two and a half are there.
  write_idx(dir.file("train-images-idx3-ubyte"), 2051, {3, 28, 28}, std::vector<unsigned char>(2 * 784 + 392, 9));
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); },
                                      {"train-images-idx3-ubyte", "truncated", "2352 bytes", "1960"}));
  // A header cut inside the dimensions.
  std::ofstream(dir.file("train-images-idx3-ubyte"), std::ios::binary) << std::string("\0\0\x08\x03\0\0", 6);
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); }, {"truncated", "dimension 0"}));
  // An empty file.
  std::ofstream(dir.file("train-images-idx3-ubyte"), std::ios::binary).close();
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); }, {"truncated", "magic number"}));
}

TEST(DataMnist, ShapeAndCountMismatches) {
  TempDir dir;
  write_small_split(dir, "train");
  write_idx(dir.file("train-labels-idx1-ubyte"), 2049, {2}, {1, 2});
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); }, {"3 images", "2 labels"}));
  write_small_split(dir, "train");
  write_idx(dir.file("train-images-idx3-ubyte"), 2051, {3, 20, 20}, std::vector<unsigned char>(1200, 1));
  EXPECT_TRUE(throws_with<ValueError>([&] { MNIST m(dir.str()); }, {"20x20", "expected 28x28"}));
}

// ---- transforms ------------------------------------------------------------------------

TEST(DataTransforms, NormalizeOneStatisticAndPerChannel) {
  data::transforms::Normalize<> one(0.5, 0.25);
  const Tensor x = from_vector(std::vector<float>{0, 0.5, 1, 0.25}, {1, 2, 2});
  EXPECT_TRUE(testing::allclose(one(x), {-2, 0, 2, -1}));
  EXPECT_EQ(one.mean().shape(), (Shape{1, 1, 1}));

  data::transforms::Normalize<> three({0.0, 1.0, 2.0}, {1.0, 2.0, 4.0});
  const Tensor rgb = full({3, 1, 2}, 2.0);
  EXPECT_TRUE(testing::allclose(three(rgb), {2, 2, 0.5, 0.5, 0, 0}));
  // Applied through an Example: the target is untouched.
  Example<> e = three.apply({rgb, label(5)});
  EXPECT_TRUE(testing::allclose(e.data, {2, 2, 0.5, 0.5, 0, 0}));
  EXPECT_EQ(e.target.item<int64_t>(), 5);

  EXPECT_TRUE(throws_with<ValueError>([&] { three(full({2, 1, 2}, 1.0)); }, {"3 statistics", "2 channel"}));
  EXPECT_TRUE(throws_with<ValueError>([] { data::transforms::Normalize<>(std::vector<double>{}, std::vector<double>{1.0}); }, {"mean"}));
}

TEST(DataTransforms, StackCollatesExamples) {
  std::vector<Example<>> batch;
  for (int64_t i = 0; i < 3; ++i) batch.push_back({full({1, 2, 2}, double(i)), label(i)});
  Example<> stacked = data::transforms::Stack<>().apply_batch(batch);
  EXPECT_EQ(stacked.data.shape(), (Shape{3, 1, 2, 2}));
  EXPECT_EQ(stacked.target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FLOAT_EQ(stacked.data[2][0][1][1].item<float>(), 2.0f);
  EXPECT_TRUE(throws_with<ValueError>([] { data::transforms::Stack<>().apply_batch({}); }, {"empty batch"}));
}

// ---- samplers --------------------------------------------------------------------------

std::vector<size_t> drain(data::samplers::Sampler<>& s, size_t batch) {
  std::vector<size_t> all;
  while (auto b = s.next(batch)) all.insert(all.end(), b->begin(), b->end());
  return all;
}

TEST(DataSamplers, SequentialInOrderAndReset) {
  data::samplers::SequentialSampler s(5);
  EXPECT_EQ(s.next(2), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(s.next(2), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(s.next(2), (std::vector<size_t>{4}));
  EXPECT_FALSE(s.next(2).has_value());
  s.reset(3);
  EXPECT_EQ(drain(s, 10), (std::vector<size_t>{0, 1, 2}));
}

TEST(DataSamplers, RandomIsAPermutationDeterministicFromTheSeed) {
  manual_seed(7);
  data::samplers::RandomSampler a(100);
  const std::vector<size_t> first = drain(a, 7);
  a.reset();
  const std::vector<size_t> second = drain(a, 7);
  std::vector<size_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> identity(100);
  std::iota(identity.begin(), identity.end(), size_t(0));
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(first, identity);
  EXPECT_NE(first, second);  // a new order per epoch

  manual_seed(7);
  data::samplers::RandomSampler b(100);
  EXPECT_EQ(drain(b, 100), first);
  b.reset();
  EXPECT_EQ(drain(b, 3), second);

  b.reset(4);
  std::vector<size_t> four = drain(b, 3);
  std::sort(four.begin(), four.end());
  EXPECT_EQ(four, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(throws_with<ValueError>([] { data::samplers::RandomSampler(-1); }, {"non-negative"}));
  EXPECT_TRUE(throws_with<ValueError>([] { data::samplers::RandomSampler(3, kFloat32); }, {"index_dtype"}));
}

// ---- data loader -------------------------------------------------------------------------

/// Example i: data full({2}, i), target i.
struct Counting : data::datasets::Dataset<Counting> {
  explicit Counting(size_t n) : n(n) {}
  Example<> get(size_t i) override { return {full({2}, double(i)), label(int64_t(i))}; }
  std::optional<size_t> size() const override { return n; }
  size_t n;
};

struct Unsized : data::datasets::Dataset<Unsized> {
  Example<> get(size_t) override { return {}; }
  std::optional<size_t> size() const override { return std::nullopt; }
};

TEST(DataLoader, SequentialBatchesOfStackedExamples) {
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
      Counting(10).map(data::transforms::Stack<>()), data::DataLoaderOptions().batch_size(4).workers(2));
  EXPECT_EQ(loader->options().workers(), 2u);
  std::vector<std::vector<int64_t>> targets;
  for (auto& batch : *loader) {
    EXPECT_EQ(batch.data.size(1), 2);
    EXPECT_EQ(batch.data.size(0), batch.target.size(0));
    targets.push_back(batch.target.to_vector<int64_t>());
  }
  EXPECT_EQ(targets, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  // A second pass is a new epoch over the same batches.
  size_t batches = 0;
  for (auto it = loader->begin(); it != loader->end(); ++it) ++batches;
  EXPECT_EQ(batches, 3u);
}

TEST(DataLoader, DropLastAndUnstackedBatches) {
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
      Counting(10), data::DataLoaderOptions(4).drop_last(true));
  std::vector<size_t> sizes;
  for (auto& batch : *loader) {
    sizes.push_back(batch.size());  // std::vector<Example<>>
    EXPECT_EQ(batch[0].data.shape(), (Shape{2}));
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 4}));
}

TEST(DataLoader, RandomSamplerByDefaultAndLambda) {
  manual_seed(3);
  auto doubled = Counting(9).map(data::transforms::Lambda<Example<>>([](Example<> e) {
    e.target = e.target * 2;
    return e;
  }));
  auto loader = data::make_data_loader(std::move(doubled).map(data::transforms::Stack<>()), 4);
  std::vector<int64_t> seen;
  std::vector<int64_t> sizes;
  for (auto& batch : *loader) {
    sizes.push_back(batch.target.size(0));
    for (int64_t t : batch.target.to_vector<int64_t>()) seen.push_back(t);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 1}));
  std::vector<int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14, 16}));
  EXPECT_NE(seen, sorted);
  // The same seed, the same order.
  manual_seed(3);
  auto again = data::make_data_loader(Counting(9).map(data::transforms::Stack<>()), 4);
  std::vector<int64_t> seen_again;
  for (auto& batch : *again)
    for (int64_t t : batch.target.to_vector<int64_t>()) seen_again.push_back(2 * t);
  EXPECT_EQ(seen_again, seen);
}

TEST(DataLoader, Errors) {
  EXPECT_TRUE(throws_with<ValueError>([] { data::make_data_loader(Unsized()); }, {"size()", "unknown"}));
  EXPECT_TRUE(throws_with<ValueError>([] { data::make_data_loader(Counting(3), data::DataLoaderOptions(0)); },
                                      {"batch_size"}));
  auto loader = data::make_data_loader(Counting(2), data::samplers::SequentialSampler(2), 2);
  auto end = loader->end();
  EXPECT_TRUE(throws_with<IndexError>([&] { *end; }, {"end iterator"}));
}

TEST(DataLoader, MnistBatchesThroughTheFullPipeline) {
  REQUIRE_FASHION();
  auto ds = MNIST(kFashion, MNIST::Mode::kTest)
                .map(data::transforms::Normalize<>(0.1307, 0.3081))
                .map(data::transforms::Stack<>());
  EXPECT_EQ(ds.size().value(), 10000u);
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(std::move(ds), 64);
  auto it = loader->begin();
  EXPECT_EQ(it->data.shape(), (Shape{64, 1, 28, 28}));
  EXPECT_EQ(it->target.shape(), (Shape{64}));
  EXPECT_EQ(it->target.dtype(), kInt64);
  EXPECT_EQ(it->target.slice(0, 0, 4).to_vector<int64_t>(), (std::vector<int64_t>{9, 2, 1, 1}));
  // Image 0's byte sum, normalized: sum((b/255 − mean)/std).
  const double expected = (33456.0 / 255.0 - 784 * 0.1307) / 0.3081;
  EXPECT_NEAR(it->data[0].sum().item<double>(), expected, 1e-2);
  size_t batches = 1;
  int64_t last = 0;
  for (++it; it != loader->end(); ++it) {
    ++batches;
    last = it->target.size(0);
  }
  EXPECT_EQ(batches, 157u);  // ceil(10000 / 64)
  EXPECT_EQ(last, 10000 - 156 * 64);
}

}  // namespace
}  // namespace dtr
