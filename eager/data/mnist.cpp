#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "eager/data/datasets.h"
#include "eager/ops.h"

namespace dtr::data::datasets {
namespace {

// IDX (the MNIST distribution format): a big-endian header of two zero
// bytes, the element type (0x08: unsigned byte) and the number of
// dimensions, then each dimension as a big-endian uint32, then the elements
// row-major. zlib's gz* functions read gzip-compressed and plain files alike.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    DTR_CHECK(!std::filesystem::is_directory(path, ec), ValueError, "'{}' is a directory, not an IDX file",
              path);
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      const int err = errno;
      throw ValueError(fmt::format("cannot open '{}': {}", path,
                                   err != 0 ? std::strerror(err) : "zlib could not allocate its state"));
    }
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  /// Reads exactly n bytes; a short read is a truncated file, a zlib error a
  /// corrupt one.
  void read(unsigned char* out, size_t n, const std::string& what) {
    size_t got = 0;
    while (got < n) {
      const unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
      const int r = gzread(file_, out + got, chunk);
      if (r < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        throw ValueError(fmt::format("'{}': cannot read {}: {} (corrupt file?)", path_, what, message));
      }
      if (r == 0) break;
      got += size_t(r);
    }
    DTR_CHECK(got == n, ValueError, "'{}' is truncated: {} needs {} bytes, the file has {} more", path_,
              what, n, got);
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

uint32_t big_endian(const unsigned char* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

/// root/name, or root/name.gz when only that exists; ValueError naming both
/// when neither does.
std::string find_file(const std::string& root, const std::string& name) {
  const std::string plain = root + "/" + name;
  std::error_code ec;
  if (std::filesystem::exists(plain, ec)) return plain;
  const std::string gz = plain + ".gz";
  if (std::filesystem::exists(gz, ec)) return gz;
  throw ValueError(fmt::format(
      "MNIST: neither '{}' nor '{}' exists (the root must hold the four IDX files of MNIST or Fashion-MNIST; "
      "Debian's dataset-fashion-mnist package installs them in /usr/share/datasets/fashion-mnist)",
      plain, gz));
}

constexpr int64_t kRows = 28, kCols = 28;

}  // namespace

IdxFile read_idx_ubyte(const std::string& path, int ndims, int64_t limit) {
  DTR_CHECK(ndims >= 1 && ndims <= 255, ValueError, "read_idx_ubyte: ndims must be in [1, 255], got {}", ndims);
  DTR_CHECK(limit >= 0, ValueError, "read_idx_ubyte: limit must be non-negative, got {}", limit);
  GzReader f(path);
  unsigned char header[4];
  f.read(header, 4, "the magic number");
  const uint32_t magic = big_endian(header);
  const uint32_t expected = 0x0800u | uint32_t(ndims);
  DTR_CHECK(magic == expected, ValueError,
            "'{}' has magic number {} (0x{:08x}), expected {} (0x{:08x}): not an IDX file of unsigned "
            "bytes with {} dimensions",
            path, magic, magic, expected, expected, ndims);
  IdxFile idx;
  size_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    f.read(header, 4, fmt::format("dimension {} of the header", d));
    const uint32_t n = big_endian(header);
    // 2^31 bytes is far past any IDX file; the check keeps a corrupt header
    // from asking for an absurd allocation.
    DTR_CHECK(total * n < (size_t(1) << 31), ValueError, "'{}': dimension {} is {}, too large for an IDX file",
              path, d, n);
    idx.dims.push_back(int64_t(n));
    total *= n;
  }
  if (limit > 0 && limit < idx.dims[0]) {
    total = total / size_t(idx.dims[0]) * size_t(limit);
    idx.dims[0] = limit;
  }
  idx.bytes.resize(total);
  f.read(idx.bytes.data(), total, fmt::format("the data of shape {}", shape_str(idx.dims)));
  return idx;
}

MNIST::MNIST(const std::string& root, Mode mode) : is_train_(mode == Mode::kTrain) {
  const std::string prefix = is_train_ ? "train" : "t10k";
  const std::string images_path = find_file(root, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(root, prefix + "-labels-idx1-ubyte");
  IdxFile images = read_idx_ubyte(images_path, 3);
  IdxFile labels = read_idx_ubyte(labels_path, 1);
  DTR_CHECK(images.dims[1] == kRows && images.dims[2] == kCols, ValueError,
            "MNIST: '{}' holds {}x{} images, expected 28x28", images_path, images.dims[1], images.dims[2]);
  DTR_CHECK(images.dims[0] == labels.dims[0], ValueError, "MNIST: '{}' has {} images but '{}' has {} labels",
            images_path, images.dims[0], labels_path, labels.dims[0]);
  const int64_t n = images.dims[0];
  std::vector<float> pixels(images.bytes.size());
  std::transform(images.bytes.begin(), images.bytes.end(), pixels.begin(),
                 [](unsigned char b) { return float(b) / 255.0f; });
  images_ = from_vector(pixels, {n, 1, kRows, kCols});
  targets_ = from_vector(std::vector<int64_t>(labels.bytes.begin(), labels.bytes.end()), {n});
}

Example<> MNIST::get(size_t index) {
  DTR_CHECK(index < size_t(images_.size(0)), IndexError, "MNIST: index {} is out of range for {} examples", index,
            images_.size(0));
  return {images_[int64_t(index)], targets_[int64_t(index)]};
}

std::optional<size_t> MNIST::size() const { return size_t(images_.size(0)); }

}  // namespace dtr::data::datasets
