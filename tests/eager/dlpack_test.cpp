// DLPack export and import (eager/dlpack.h): zero-copy in both directions,
// the pin on exported storages (Note [pin guard]) and the producer's deleter
// on imported ones, called exactly once.
#include <atomic>
#include <cstring>
#include <memory>
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

// Two exports, two pins: the storage is evictable only after both deleters.
TEST(DLPack, EachExportHoldsItsOwnPin) {
  Tensor y = randn({1024}) * 3.0;
  DLManagedTensor* a = to_dlpack(y, DLPackAccess::kReadOnly);
  DLManagedTensor* b = to_dlpack(y.slice(0, 10, 20), DLPackAccess::kReadOnly);
  a->deleter(a);
  EXPECT_TRUE(remat::is_pinned(*y.storage()));
  b->deleter(b);
  EXPECT_FALSE(remat::is_pinned(*y.storage()));
}

// The export holds the bytes, not the autograd graph.
TEST(DLPack, ExportHoldsADetachedHandle) {
  Tensor w = randn({8}).requires_grad_();
  Tensor y = w * 2.0;
  DLManagedTensor* m = to_dlpack(y, DLPackAccess::kReadOnly);
  std::weak_ptr<autograd::Node> grad_fn = y.grad_fn();
  ASSERT_FALSE(grad_fn.expired());
  y = Tensor();
  EXPECT_TRUE(grad_fn.expired());
  m->deleter(m);
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

// ---- DLPack 1.x: DLManagedTensorVersioned ----------------------------------

// A versioned producer: its own buffer, flags and version, counting deleter calls.
struct VersionedProducer {
  std::vector<float> buffer;
  std::vector<int64_t> shape;
  DLManagedTensorVersioned managed{};
  std::atomic<int> deleted{0};

  VersionedProducer(std::vector<float> values, std::vector<int64_t> shape_, uint64_t flags)
      : buffer(std::move(values)), shape(std::move(shape_)) {
    managed.version = DLPackVersion{1, 0};
    managed.flags = flags;
    DLTensor& dl = managed.dl_tensor;
    dl.data = buffer.data();
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = int32_t(shape.size());
    dl.dtype = DLDataType{kDLFloat, 32, 1};
    dl.shape = shape.data();
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensorVersioned* m) {
      static_cast<VersionedProducer*>(m->manager_ctx)->deleted.fetch_add(1);
    };
  }
};

TEST(DLPackVersioned, RoundTripIsZeroCopyVersionedAndFlagged) {
  Tensor t = randn({4, 6}).t();  // a strided view
  const std::vector<float> expected = t.to_vector<float>();
  for (DLPackAccess access : {DLPackAccess::kReadWrite, DLPackAccess::kReadOnly}) {
    const bool ro = access == DLPackAccess::kReadOnly;
    SCOPED_TRACE(ro ? "read-only" : "read-write");
    DLManagedTensorVersioned* m = to_dlpack_versioned(t, access);
    EXPECT_EQ(m->version.major, 1u);
    EXPECT_EQ(m->version.minor, uint32_t(DLPACK_MINOR_VERSION));
    EXPECT_EQ(m->flags, ro ? DLPACK_FLAG_BITMASK_READ_ONLY : 0u);
    EXPECT_EQ(m->dl_tensor.data, t.const_data_ptr());
    EXPECT_EQ(m->dl_tensor.strides[0], 1);
    EXPECT_EQ(m->dl_tensor.strides[1], 6);
    Tensor u = from_dlpack_versioned(m);
    EXPECT_EQ(u.const_data_ptr(), t.const_data_ptr());
    EXPECT_EQ(u.strides(), t.strides());
    EXPECT_EQ(u.to_vector<float>(), expected);
    EXPECT_EQ(u.storage()->read_only, ro);
  }
  // A read-only export is not a freeze: dtr may still write, and the
  // storage keeps its lineage (not borrowed).
  Tensor y = randn({8}) * 2.0;
  DLManagedTensorVersioned* m = to_dlpack_versioned(y, DLPackAccess::kReadOnly);
  EXPECT_FALSE(remat::is_constant(*y.storage()));
  y.add_(1.0);
  EXPECT_EQ(static_cast<const float*>(m->dl_tensor.data)[0], y.to_vector<float>()[0]);
  m->deleter(m);
}

TEST(DLPackVersioned, ReadOnlyImportRefusesEveryWriteAndAllowsReads) {
  VersionedProducer p({1, 2, 3, 4, 5, 6}, {2, 3}, DLPACK_FLAG_BITMASK_READ_ONLY);
  {
    Tensor u = from_dlpack_versioned(&p.managed);
    EXPECT_EQ(u.const_data_ptr(), p.buffer.data());  // shared, not copied
    EXPECT_EQ((u * 2.0).sum().item<float>(), 42.0f);
    auto refuses = [&](auto&& write, const char* op) {
      const std::string msg = error_message<ValueError>(write);
      EXPECT_NE(msg.find("read-only"), std::string::npos) << op << ": '" << msg << "'";
      EXPECT_NE(msg.find(op), std::string::npos) << msg;
    };
    refuses([&] { u.add_(1.0); }, "add_");
    refuses([&] { u.select(0, 1).mul_(2.0); }, "mul_");  // a view shares the flag
    refuses([&] { u.copy_(zeros({2, 3})); }, "copy_");
    refuses([&] { u.fill_(0.0); }, "fill_");
    refuses([&] { (void)u.data_ptr<float>(); }, "data_ptr");
    refuses([&] { (void)to_dlpack(u); }, "to_dlpack");
    refuses([&] { (void)to_dlpack_versioned(u); }, "to_dlpack_versioned");
    EXPECT_EQ(p.buffer, (std::vector<float>{1, 2, 3, 4, 5, 6}));  // nothing written
    EXPECT_EQ(u.storage()->version, 0u);
    // Read-only exports work (and carry the flag on); a copy is writable.
    DLManagedTensorVersioned* ro = to_dlpack_versioned(u, DLPackAccess::kReadOnly);
    EXPECT_EQ(ro->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    ro->deleter(ro);
    Tensor c = u.clone();
    c.add_(1.0);
    EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  }
  EXPECT_EQ(p.deleted.load(), 1);
  VersionedProducer w({1, 2}, {2}, 0);
  Tensor v = from_dlpack_versioned(&w.managed);
  v.add_(1.0);  // no flag: writes through, as a legacy import
  EXPECT_EQ(w.buffer, (std::vector<float>{2, 3}));
}

TEST(DLPackVersioned, CopyExportIsFlaggedAndOwnsItsBytes) {
  Tensor t = randn({3, 4}).t();
  DLManagedTensorVersioned* m = to_dlpack_versioned(t, DLPackAccess::kReadWrite, /*copy=*/true);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_NE(m->dl_tensor.data, t.const_data_ptr());
  EXPECT_EQ(m->dl_tensor.strides[0], 3);  // contiguous
  EXPECT_EQ(m->dl_tensor.strides[1], 1);
  EXPECT_FALSE(remat::is_constant(*t.storage()));  // `t` is neither borrowed nor pinned
  static_cast<float*>(m->dl_tensor.data)[0] = 1234.0f;
  EXPECT_NE(t.to_vector<float>()[0], 1234.0f);
  Tensor u = from_dlpack_versioned(m);  // IS_COPIED: imported as any other buffer
  EXPECT_EQ(u.to_vector<float>()[0], 1234.0f);
  u.add_(1.0);
  DLManagedTensorVersioned* r = to_dlpack_versioned(t, DLPackAccess::kReadOnly, true);
  EXPECT_EQ(r->flags, DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
  r->deleter(r);
}

TEST(DLPackVersioned, OtherMajorVersionsAreRefusedAndStayTheCallers) {
  EXPECT_THROW(from_dlpack_versioned(nullptr), ValueError);
  VersionedProducer p({1, 2}, {2}, 0);
  p.managed.version = DLPackVersion{2, 3};
  std::string msg = error_message<ValueError>([&] { (void)from_dlpack_versioned(&p.managed); });
  EXPECT_NE(msg.find("DLPack 2.3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1.x"), std::string::npos) << msg;
  p.managed.version = DLPackVersion{0, 8};
  msg = error_message<ValueError>([&] { (void)from_dlpack_versioned(&p.managed); });
  EXPECT_NE(msg.find("DLPack 0.8"), std::string::npos) << msg;
  EXPECT_EQ(p.deleted.load(), 0);
  p.managed.version = DLPackVersion{1, 7};  // a newer minor is fine
  { Tensor u = from_dlpack_versioned(&p.managed); EXPECT_EQ(u.sum().item<float>(), 3.0f); }
  EXPECT_EQ(p.deleted.load(), 1);
  // Typed import errors leave it the caller's too.
  VersionedProducer q({1, 2}, {2}, 0);
  q.managed.dl_tensor.dtype = DLDataType{kDLComplex, 64, 1};
  msg = error_message<TypeError>([&] { (void)from_dlpack_versioned(&q.managed); });
  EXPECT_NE(msg.find("from_dlpack_versioned"), std::string::npos) << msg;
  EXPECT_EQ(q.deleted.load(), 0);
}

TEST(DLPackVersioned, ExportDeleterRunsOnceAndReleasesThePin) {
  Tensor y = randn({65536}) * 3.0;
  std::weak_ptr<Storage> weak = y.storage();
  DLManagedTensorVersioned* m = to_dlpack_versioned(y, DLPackAccess::kReadOnly);
  Tensor u = from_dlpack_versioned(m);  // dtr -> dtr: the import owns the export
  EXPECT_TRUE(remat::is_pinned(*y.storage()));
  y = Tensor();
  EXPECT_FALSE(weak.expired());  // the export's handle keeps the bytes
  u = Tensor();                   // the import's deleter runs the export's, once
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace dtr
