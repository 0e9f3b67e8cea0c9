// DLPack export and import (eager/dlpack.h): zero-copy in both directions,
// the pin on exported storages (Note [pin guard]) and the producer's deleter
// on imported ones, called exactly once.
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "tests/testing.h"

namespace dtr {
namespace {

using dtr::testing::error_message;

using dtr::testing::BudgetScope;
using dtr::testing::churn;

std::vector<std::byte> bytes_of(const void* p, int64_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  return std::vector<std::byte>(b, b + n);
}

// A tensor of `dtype` with varied values (and, for floats, varied low bits).
Tensor sample(DType dtype) {
  Tensor x = randn({3, 5}) * 100.0;
  if (dtype == kBool) return gt(x, 0.0);
  if (dtype == kUInt8) return x.abs().to(dtype);
  return x.to(dtype);
}

struct DTypeCase {
  DType dtype;
  uint8_t code, bits;
};

TEST(DLPack, RoundTripOfEveryDTypeIsZeroCopyAndBitwise) {
  const DTypeCase cases[] = {
      {kFloat32, kDLFloat, 32}, {kFloat64, kDLFloat, 64}, {kFloat16, kDLFloat, 16},
      {kBFloat16, kDLBfloat, 16}, {kInt64, kDLInt, 64},   {kInt32, kDLInt, 32},
      {kUInt8, kDLUInt, 8},     {kBool, 6, 8},
  };
  static_assert(std::size(cases) == size_t(kNumDTypes));
  for (const DTypeCase& c : cases) {
    SCOPED_TRACE(dtype_name(c.dtype));
    Tensor t = sample(c.dtype);
    const auto expected = bytes_of(t.const_data_ptr(), t.nbytes());
    DLManagedTensor* m = to_dlpack(t, DLPackAccess::kReadOnly);
    const DLTensor& dl = m->dl_tensor;
    EXPECT_EQ(dl.dtype.code, c.code);
    EXPECT_EQ(dl.dtype.bits, c.bits);
    EXPECT_EQ(dl.dtype.lanes, 1);
    EXPECT_EQ(dl.device.device_type, kDLCPU);
    EXPECT_EQ(dl.device.device_id, 0);
    ASSERT_EQ(dl.ndim, 2);
    EXPECT_EQ(dl.shape[0], 3);
    EXPECT_EQ(dl.shape[1], 5);
    EXPECT_EQ(dl.strides[0], 5);
    EXPECT_EQ(dl.strides[1], 1);
    EXPECT_EQ(dl.byte_offset, 0u);
    EXPECT_EQ(bytes_of(dl.data, t.nbytes()), expected);
    Tensor u = from_dlpack(m);
    EXPECT_EQ(u.dtype(), c.dtype);
    EXPECT_EQ(u.shape(), t.shape());
    EXPECT_EQ(u.const_data_ptr(), t.const_data_ptr());  // no copy either way
    EXPECT_EQ(bytes_of(u.const_data_ptr(), u.nbytes()), expected);
    EXPECT_TRUE(dtr::testing::bitwise_equal(u * 1, t * 1));
  }
}

TEST(DLPack, ViewsExportWithTheirStridesAndOffset) {
  Tensor x = arange(24, kFloat32).view({4, 6});
  const auto* base = static_cast<const float*>(x.const_data_ptr());
  {
    Tensor tt = x.t();  // shape [6, 4], strides [1, 6]
    DLManagedTensor* m = to_dlpack(tt, DLPackAccess::kReadOnly);
    const DLTensor& dl = m->dl_tensor;
    EXPECT_EQ(dl.data, base);
    EXPECT_EQ(dl.shape[0], 6);
    EXPECT_EQ(dl.strides[0], 1);
    EXPECT_EQ(dl.strides[1], 6);
    const auto* p = static_cast<const float*>(dl.data);
    EXPECT_EQ(p[2 * dl.strides[0] + 3 * dl.strides[1]], 20.0f);  // tt[2][3] = x[3][2]
    Tensor u = from_dlpack(m);
    EXPECT_EQ(u.strides(), tt.strides());
    EXPECT_FALSE(u.is_contiguous());
    EXPECT_EQ(u.to_vector<float>(), tt.to_vector<float>());
  }
  {
    Tensor rows = x.slice(0, 1, 3).slice(1, 2, 5);  // x[1:3, 2:5], offset 8 elements
    ASSERT_EQ(rows.storage_offset(), 8);
    DLManagedTensor* m = to_dlpack(rows, DLPackAccess::kReadOnly);
    const DLTensor& dl = m->dl_tensor;
    // Element 0 in `data` (byte_offset 0), as PyTorch exports.
    EXPECT_EQ(static_cast<const std::byte*>(dl.data) + dl.byte_offset,
              reinterpret_cast<const std::byte*>(base + 8));
    EXPECT_EQ(dl.strides[0], 6);
    EXPECT_EQ(dl.strides[1], 1);
    Tensor u = from_dlpack(m);
    EXPECT_EQ(u.to_vector<float>(), (std::vector<float>{8, 9, 10, 14, 15, 16}));
  }
}

// The consumer's deleter counts its calls and the thread it ran on.
struct Producer {
  std::vector<float> buffer;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
  std::atomic<int> deleted{0};
  std::atomic<std::thread::id> deleter_thread{};

  explicit Producer(std::vector<float> values, std::vector<int64_t> shape_,
                    std::vector<int64_t> strides_ = {}, uint64_t byte_offset = 0)
      : buffer(std::move(values)), shape(std::move(shape_)), strides(std::move(strides_)) {
    DLTensor& dl = managed.dl_tensor;
    dl.data = buffer.data();
    dl.byte_offset = byte_offset;
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = int32_t(shape.size());
    dl.dtype = DLDataType{kDLFloat, 32, 1};
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* m) {
      auto* self = static_cast<Producer*>(m->manager_ctx);
      self->deleter_thread = std::this_thread::get_id();
      self->deleted.fetch_add(1);
    };
  }
};

TEST(DLPack, ImportHonoursStridesAndByteOffset) {
  // data + 8 bytes is element 2; shape [2, 2] with strides [1, 2] reads it
  // column-major: [[2, 4], [3, 5]].
  Producer p({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 2}, {1, 2}, 8);
  {
    Tensor u = from_dlpack(&p.managed);
    EXPECT_EQ(u.strides(), (Strides{1, 2}));
    EXPECT_EQ(u.to_vector<float>(), (std::vector<float>{2, 4, 3, 5}));
    EXPECT_EQ(u.const_data_ptr(), p.buffer.data() + 2);
    // The producer writes through its own pointer: dtr sees it (borrowed).
    p.buffer[2] = 42;
    EXPECT_EQ(u.to_vector<float>()[0], 42.0f);
    EXPECT_EQ(p.deleted.load(), 0);
  }
  EXPECT_EQ(p.deleted.load(), 1);
  Producer q({1, 2, 3, 4, 5, 6}, {2, 3});  // null strides: row-major
  Tensor v = from_dlpack(&q.managed);
  EXPECT_EQ(v.strides(), (Strides{3, 1}));
  EXPECT_EQ(v.sum({1}).to_vector<float>(), (std::vector<float>{6, 15}));
}

TEST(DLPack, ImportCallsTheDeleterOnceAfterTheLastView) {
  Producer p({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor computed;
  {
    Tensor u = from_dlpack(&p.managed);
    Tensor row = u.select(0, 1);
    Tensor tt = u.t();
    computed = u * 2.0;
    u = Tensor();
    tt = Tensor();
    EXPECT_EQ(p.deleted.load(), 0);  // `row` still reads the buffer
    EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  }
  computed = Tensor();
  EXPECT_EQ(p.deleted.load(), 1);
}

TEST(DLPack, ImportedTensorDestroyedOnAnotherThreadCallsTheDeleterThere) {
  Producer p({1, 2, 3, 4}, {4});
  Tensor u = from_dlpack(&p.managed);
  std::thread::id worker_id;
  std::thread worker([t = std::move(u), &worker_id]() mutable {
    worker_id = std::this_thread::get_id();
    EXPECT_EQ(t.sum().item<float>(), 10.0f);
    t = Tensor();
  });
  worker.join();
  EXPECT_EQ(p.deleted.load(), 1);
  EXPECT_EQ(p.deleter_thread.load(), worker_id);
}

TEST(DLPack, EmptyImportWithNullDataCallsTheDeleter) {
  Producer p({}, {0, 3});
  p.managed.dl_tensor.data = nullptr;
  {
    Tensor u = from_dlpack(&p.managed);
    EXPECT_EQ(u.numel(), 0);
    EXPECT_EQ(u.shape(), (Shape{0, 3}));
  }
  EXPECT_EQ(p.deleted.load(), 1);
}

TEST(DLPack, ImportErrorsAreTypedAndLeaveOwnershipWithTheCaller) {
  EXPECT_THROW(from_dlpack(nullptr), ValueError);
  Producer p({1, 2, 3, 4}, {2, 2});
  DLTensor& dl = p.managed.dl_tensor;
  const DLTensor good = dl;
  auto expect_error = [&](auto error_tag, auto&& edit, const char* needle) {
    using E = decltype(error_tag);
    dl = good;
    edit();
    const std::string msg = error_message<E>([&] { (void)from_dlpack(&p.managed); });
    EXPECT_NE(msg.find(needle), std::string::npos) << "got: '" << msg << "'";
    EXPECT_EQ(p.deleted.load(), 0) << needle;
  };
  expect_error(TypeError{""}, [&] { dl.dtype = DLDataType{kDLComplex, 64, 1}; }, "code 5, bits 64, lanes 1");
  expect_error(TypeError{""}, [&] { dl.dtype = DLDataType{kDLFloat, 8, 1}; }, "code 2, bits 8, lanes 1");
  expect_error(TypeError{""}, [&] { dl.dtype = DLDataType{kDLFloat, 32, 4}; }, "lanes 4");
  expect_error(TypeError{""}, [&] { dl.dtype = DLDataType{6, 32, 1}; }, "code 6, bits 32");
  expect_error(DeviceError{""}, [&] { dl.device = DLDevice{kDLVulkan, 0}; }, "device type 7");
  expect_error(DeviceError{""}, [&] { dl.device = DLDevice{kDLCUDA, 97}; }, "97");
  expect_error(ValueError{""}, [&] { dl.ndim = -1; }, "ndim is -1");
  expect_error(ValueError{""}, [&] { dl.ndim = 17; }, "ndim is 17");
  expect_error(ValueError{""}, [&] { dl.shape = nullptr; }, "shape is null");
  expect_error(ValueError{""}, [&] { p.shape[0] = -2; }, "negative size");
  p.shape[0] = 2;
  expect_error(ValueError{""}, [&] { dl.data = nullptr; }, "data is null");
  expect_error(ValueError{""}, [&] { dl.byte_offset = 2; }, "not aligned");
  std::vector<int64_t> negative{-1, 1};
  expect_error(ValueError{""}, [&] { dl.strides = negative.data(); }, "negative stride");
  // Still the caller's: it deletes it itself.
  dl = good;
  p.managed.deleter(&p.managed);
  EXPECT_EQ(p.deleted.load(), 1);
}

TEST(DLPack, ExportOfAnUndefinedTensorIsAValueError) {
  EXPECT_THROW(to_dlpack(Tensor()), ValueError);
}

// Export while evicted (kReadOnly): made resident, bitwise what it was,
// pinned against pressure until the deleter runs, and evictable afterwards.
TEST(DLPack, ExportOfAnEvictedTensorRematerializesAndPinsIt) {
  Tensor y = randn({65536}) * 3.0;
  const auto expected = bytes_of(y.const_data_ptr(), y.nbytes());
  BudgetScope budget(int64_t(1) << 20);
  churn();
  ASSERT_FALSE(y.storage()->resident());
  DLManagedTensor* m = to_dlpack(y, DLPackAccess::kReadOnly);
  ASSERT_TRUE(y.storage()->resident());
  EXPECT_TRUE(remat::is_pinned(*y.storage()));
  EXPECT_FALSE(remat::is_constant(*y.storage()));  // lineage kept
  EXPECT_EQ(bytes_of(m->dl_tensor.data, y.nbytes()), expected);
  const int64_t evictions = remat::stats().evictions;
  churn();
  EXPECT_GT(remat::stats().evictions, evictions);
  EXPECT_TRUE(y.storage()->resident());  // pinned: not evicted
  EXPECT_EQ(m->dl_tensor.data, y.const_data_ptr());  // not moved
  EXPECT_EQ(bytes_of(m->dl_tensor.data, y.nbytes()), expected);
  // The deleter may run on any thread.
  std::thread([m] { m->deleter(m); }).join();
  EXPECT_FALSE(remat::is_pinned(*y.storage()));
  churn();
  EXPECT_FALSE(y.storage()->resident());  // evictable again
  EXPECT_EQ(bytes_of(y.const_data_ptr(), y.nbytes()), expected);
}

// The export keeps the tensor alive: its bytes stay valid after the last
// user handle goes, until the deleter.
TEST(DLPack, ExportOutlivesTheTensor) {
  Tensor y = arange(16, kFloat32) * 2.0;
  DLManagedTensor* m = to_dlpack(y, DLPackAccess::kReadOnly);
  std::weak_ptr<Storage> storage = y.storage();
  y = Tensor();
  ASSERT_FALSE(storage.expired());
  EXPECT_EQ(static_cast<const float*>(m->dl_tensor.data)[7], 14.0f);
  m->deleter(m);
  EXPECT_TRUE(storage.expired());
}

// kReadWrite: the consumer's writes show in the dtr tensor, and the storage
// is never rebuilt from lineage (which would lose them).
TEST(DLPack, ReadWriteExportSharesWritesAndIsNeverRebuilt) {
  Tensor y = randn({65536}) * 3.0;
  DLManagedTensor* m = to_dlpack(y);
  EXPECT_TRUE(remat::is_constant(*y.storage()));
  EXPECT_EQ(remat::producer(*y.storage()), nullptr);
  auto* p = static_cast<float*>(m->dl_tensor.data);
  for (int64_t i = 0; i < y.numel(); ++i) p[i] = float(i);
  const double expected = 65535.0 * 65536.0 / 2.0;
  EXPECT_EQ(y.sum().item<double>(), expected);
  m->deleter(m);
  BudgetScope budget(int64_t(1) << 20);
  churn();
  EXPECT_TRUE(y.storage()->resident());
  EXPECT_EQ(y.sum().item<double>(), expected);
}

// A dtr tensor exported and imported back: one storage chain, two deleters
// (the import's, then the export's), each once.
TEST(DLPack, ExportThenImportOfAnEmptyTensor) {
  Tensor z = zeros({0, 3});
  Tensor u = from_dlpack(to_dlpack(z));
  EXPECT_EQ(u.numel(), 0);
  EXPECT_EQ(u.shape(), (Shape{0, 3}));
}

}  // namespace
}  // namespace dtr
