// Factory functions (eager/ops/creation.cpp): PyTorch's default dtypes, shape
// overflow checks, and from_blob's borrowed buffers under a budget
// (Note [borrowed storage]).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using ::testing::HasSubstr;

/// Sets a budget for one test and always lifts it again.
struct ScopedBudget {
  explicit ScopedBudget(std::optional<int64_t> bytes) { remat::set_memory_budget(bytes); }
  ~ScopedBudget() { remat::set_memory_budget(std::nullopt); }
};

/// Evicts every storage that may be evicted, so resident bytes are the
/// never-evictable floor, and leaves the budget unlimited.
void evict_everything() {
  remat::set_memory_budget(1);  // below the floor: logs a warning, evicts all it can
  remat::set_memory_budget(std::nullopt);
}

// ---- default dtypes (torch 1.13 values) -------------------------------------------

TEST(CreationDtype, ArangeIsFloatWhenAnyArgumentIs) {
  // torch.arange(0, 1, 0.25) = float32 [0, 0.25, 0.5, 0.75].
  const Tensor a = arange(0, 1, 0.25);
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(5.0).dtype(), kFloat32);
  EXPECT_EQ(arange(0, 5, 1.0).dtype(), kFloat32);
  EXPECT_EQ(arange(1, 2.5, 0.5).to_vector<float>(), (std::vector<float>{1.0f, 1.5f, 2.0f}));
  // torch.arange(-1.0, 1.0, 0.3): start + i * step in double, rounded to float.
  std::vector<float> expected;
  for (int i = 0; i < 7; ++i) expected.push_back(float(-1.0 + i * 0.3));
  EXPECT_EQ(arange(-1.0, 1.0, 0.3).to_vector<float>(), expected);
  // A device alone sets no dtype: still inferred.
  EXPECT_EQ(arange(5, kCPU).dtype(), kInt64);
  EXPECT_EQ(arange(0, 1, 0.5, kCPU).dtype(), kFloat32);
  // A dtype given wins.
  EXPECT_EQ(arange(0, 1, 0.25, kFloat64).to_vector<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(arange(4, kFloat32).dtype(), kFloat32);
}

TEST(CreationDtype, IntegerArangeIsExactBeyondTwoToThe53) {
  // torch.arange(2**53, 2**53 + 4) = [9007199254740992, ..., 9007199254740995].
  const int64_t base = int64_t{1} << 53;
  EXPECT_EQ(arange(base, base + 4).to_vector<int64_t>(),
            (std::vector<int64_t>{base, base + 1, base + 2, base + 3}));
  EXPECT_EQ(arange(5, -3, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1, -1}));
  // The count is exact too (a double count gave 4 elements, or none beyond 2^55).
  for (int shift : {53, 54, 55, 62}) {
    const int64_t b = int64_t{1} << shift;
    EXPECT_EQ(arange(b + 1, b + 4).to_vector<int64_t>(), (std::vector<int64_t>{b + 1, b + 2, b + 3}));
  }
  const int64_t top = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(arange(top - 2, top).to_vector<int64_t>(), (std::vector<int64_t>{top - 2, top - 1}));
  EXPECT_THROW(arange(top, top - 1), ValueError);
  EXPECT_THROW(arange(0.0, 1e30, 1e-10), ValueError);  // too many elements, not a wrapped count
}

TEST(CreationDtype, FullFollowsItsFillValue) {
  // torch.full((2,), 3) is int64, (2,), True bool, (2,), 2.5 float32.
  const Tensor i = full({2}, 3);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_EQ(full({2}, true).to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(full({2}, 2.5).dtype(), kFloat32);
  EXPECT_EQ(full({2}, 2.5f).dtype(), kFloat32);
  EXPECT_EQ(full({2}, 3, kFloat32).to_vector<float>(), (std::vector<float>{3.0f, 3.0f}));
  EXPECT_EQ(full({2}, 3, kCPU).dtype(), kInt64);
  // torch.full((2,), 2**62 + 1): every bit kept.
  const int64_t big = (int64_t{1} << 62) + 1;
  EXPECT_EQ(full({2}, big).to_vector<int64_t>(), (std::vector<int64_t>{big, big}));
  // zeros, ones and empty stay float32 (they fill with integers internally).
  EXPECT_EQ(zeros({2}).dtype(), kFloat32);
  EXPECT_EQ(ones({2}, kCPU).dtype(), kFloat32);
  EXPECT_EQ(empty({2}).dtype(), kFloat32);
  EXPECT_EQ(zeros({2}, kInt32).dtype(), kInt32);
  EXPECT_EQ(ones({2}).to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
}

TEST(CreationDtype, RandomFactoriesAndLikeForms) {
  EXPECT_EQ(randint(0, 10, {3}).dtype(), kInt64);
  EXPECT_EQ(randint(0, 10, {3}, kCPU).dtype(), kInt64);  // was float32 with a device only
  EXPECT_EQ(randint(0, 10, {3}, kInt32).dtype(), kInt32);
  EXPECT_EQ(rand({2}).dtype(), kFloat32);
  EXPECT_EQ(randn({2}, kCPU).dtype(), kFloat32);
  EXPECT_THROW(rand({2}, kInt64), TypeError);
  const Tensor i = arange(3);
  EXPECT_EQ(zeros_like(i).dtype(), kInt64);
  // torch.full_like(torch.arange(3), 2.5) = [2, 2, 2] (int64).
  EXPECT_EQ(full_like(i, 2.5).to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(ones_like(full({2}, true)).dtype(), kBool);
}

TEST(CreationDtype, FromVectorKeepsItsDataTypeWithADeviceOnly) {
  const Tensor t = from_vector(std::vector<int64_t>{1, int64_t{1} << 60}, {}, kCPU);
  EXPECT_EQ(t.dtype(), kInt64);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, int64_t{1} << 60}));
  EXPECT_EQ(from_vector(std::vector<int64_t>{1, 2}, {}, kFloat32).dtype(), kFloat32);
}

// ---- shapes whose element count overflows ----------------------------------------

TEST(CreationShape, OverflowingShapesAreValueErrorsNamingTheShape) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_THAT(testing::error_message<ValueError>([&] { zeros({big, big}); }),
              HasSubstr("[1099511627776, 1099511627776]"));
  EXPECT_THROW(ones({big, big}, kInt64), ValueError);
  EXPECT_THROW(zeros({int64_t{1} << 60}, kFloat64), ValueError);  // 2^63 bytes
  EXPECT_THROW(randn({big, big}), ValueError);
  // As in PyTorch, an empty tensor may have sizes whose product overflows.
  const Tensor e = zeros({0, big, big});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.shape(), (Shape{0, big, big}));
  EXPECT_THROW(from_vector(std::vector<float>{1}, {big, big}), ValueError);
  const Tensor x = arange(4);
  EXPECT_THAT(testing::error_message<ValueError>([&] { x.view({big, big, -1}); }), HasSubstr("view"));
  EXPECT_THROW(x.reshape({big, big, big}), ValueError);
  EXPECT_THAT(testing::error_message<ValueError>([&] { full({1}, 1.0).expand({big, big}); }),
              HasSubstr("[1099511627776, 1099511627776]"));
  // cat's size along the dimension is checked before it could wrap (16 * 2^59 = 2^63).
  const Tensor part = zeros({int64_t{1} << 59, 0});
  EXPECT_THAT(testing::error_message<ValueError>([&] { cat(std::vector<Tensor>(16, part)); }), HasSubstr("cat"));
}

// ---- from_blob -------------------------------------------------------------------

TEST(FromBlob, ValidatesExtentAlignmentAndNull) {
  std::vector<float> buf(16, 1.0f);
  // A stride of 2^40 elements over 2^24 rows spans more than int64 bytes.
  EXPECT_THAT(testing::error_message<ValueError>([&] {
                from_blob(buf.data(), {int64_t{1} << 24}, {int64_t{1} << 40}, kFloat32);
              }),
              HasSubstr("from_blob"));
  EXPECT_THROW(from_blob(buf.data(), {2, 2}, {int64_t{1} << 62, 1}, kFloat32), ValueError);
  EXPECT_THROW(from_blob(buf.data(), {int64_t{1} << 40, int64_t{1} << 40}, kFloat32), ValueError);
  EXPECT_THROW(from_blob(buf.data(), {-1}, kFloat32), ValueError);
  // A span that fits in int64 but runs past the buffer into unmapped memory
  // (12 TiB here): refused, instead of a fault at the first read.
  EXPECT_THAT(testing::error_message<ValueError>([&] {
                from_blob(buf.data(), {4}, {int64_t{1} << 40}, kFloat32);
              }),
              HasSubstr("unmapped memory"));
  // A pointer not aligned for its dtype.
  auto* odd = reinterpret_cast<std::byte*>(buf.data()) + 1;
  const std::string msg = testing::error_message<ValueError>([&] { from_blob(odd, {2}, kFloat32); });
  EXPECT_THAT(msg, HasSubstr("not aligned for float32"));
  EXPECT_THAT(msg, HasSubstr("4-byte alignment"));
  EXPECT_THAT(msg, HasSubstr(fmt::format("{}", static_cast<const void*>(odd))));
  EXPECT_NO_THROW(from_blob(odd, {2}, kUInt8));
  // Null is an empty tensor (torch.from_blob(nullptr, {0})), nothing else.
  const Tensor e = from_blob(nullptr, {0}, kFloat32);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.sum().item<float>(), 0.0f);
  EXPECT_EQ((e + 1).numel(), 0);
  EXPECT_EQ(from_blob(nullptr, {3, 0}, kFloat64).shape(), (Shape{3, 0}));
  EXPECT_THAT(testing::error_message<ValueError>([] { from_blob(nullptr, {2}, kFloat32); }), HasSubstr("null"));
  // Strides within bounds still work.
  const Tensor t = from_blob(buf.data(), {2, 2}, {8, 1}, kFloat32);
  EXPECT_EQ(t.sum().item<float>(), 4.0f);
}

// Note [borrowed storage]: the program refills a staging buffer; values
// computed from it before stay as they were, even when evicted and rebuilt.
TEST(FromBlob, RefilledBufferNeverChangesRematerializedValues) {
  constexpr int64_t n = 1 << 16;  // 256 KiB of float32
  std::vector<float> buf(size_t(n), 1.0f);
  const Tensor t = from_blob(buf.data(), {n}, kFloat32);
  const Tensor y = t.exp();                                   // reads the buffer
  const Tensor h = t.slice(0, 0, n / 2).exp();                // through a view
  const Tensor z = y * 2.0;                                   // downstream of y
  // The values as first computed, without a budget.
  const std::vector<float> y0 = y.to_vector<float>(), h0 = h.to_vector<float>(), z0 = z.to_vector<float>();
  ASSERT_TRUE(testing::allclose(y.slice(0, 0, 1), {std::exp(1.0)}));
  const int64_t evictions = remat::stats().evictions;
  {
    // Room for three more storages of n floats: the temporaries below evict
    // everything that may be evicted, several times over.
    ScopedBudget budget(remat::stats().resident_bytes + 3 * n * 4);
    std::vector<Tensor> temporaries;
    for (int i = 0; i < 8; ++i) temporaries.push_back(randn({n}));
    EXPECT_GT(remat::stats().evictions, evictions + 4);
    EXPECT_FALSE(z.storage()->resident());  // z really is rebuilt below
    // The program reuses its staging buffer.
    std::fill(buf.begin(), buf.end(), 0.0f);
    for (int i = 0; i < 8; ++i) temporaries.push_back(randn({n}));
    EXPECT_EQ(z.to_vector<float>(), z0);
    EXPECT_EQ(y.to_vector<float>(), y0);
    EXPECT_EQ(h.to_vector<float>(), h0);
  }
  // The tensor itself aliases the buffer, as in PyTorch.
  EXPECT_EQ(t.sum().item<float>(), 0.0f);
  std::fill(buf.begin(), buf.end(), 2.0f);
  EXPECT_EQ(t.sum().item<float>(), 2.0f * n);
}

TEST(FromBlob, InPlaceOpWritesIntoTheBufferAndKeepsEarlierResults) {
  std::vector<float> buf{1, 2, 3, 4};
  Tensor t = from_blob(buf.data(), {4}, kFloat32);
  const Tensor y = t * 10.0;
  t.mul_(2.0);  // as in PyTorch, the write lands in the buffer
  EXPECT_EQ(buf, (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
  t.slice(0, 0, 2).add_(1.0);  // through a view
  EXPECT_EQ(buf, (std::vector<float>{3, 5, 6, 8}));
  EXPECT_EQ((t + 0.0).to_vector<float>(), (std::vector<float>{3, 5, 6, 8}));
}

// ---- the OutOfMemoryError report -----------------------------------------------

TEST(OutOfMemoryReport, NamesTheOpAndTheFloor) {
  constexpr int64_t n = 1 << 16;
  ScopedBudget lift(std::nullopt);
  evict_everything();
  const Tensor c = from_vector(std::vector<float>(size_t(n), 1.0f));  // a constant
  const int64_t floor = remat::stats().resident_bytes;
  remat::set_memory_budget(floor + n * 4 / 2);
  const std::string msg = testing::error_message<OutOfMemoryError>([&] { c.exp(); });
  EXPECT_THAT(msg, HasSubstr("while running op 'exp'"));
  EXPECT_THAT(msg, HasSubstr(fmt::format("Never-evictable floor: {} bytes", floor)));
  EXPECT_THAT(msg, HasSubstr(fmt::format("at least {} bytes", floor + n * 4)));
  EXPECT_THAT(msg, HasSubstr("no eviction heuristic can fit"));
  remat::set_memory_budget(std::nullopt);
  EXPECT_TRUE(testing::allclose(c.exp().slice(0, 0, 2), {std::exp(1.0), std::exp(1.0)}));
}

TEST(OutOfMemoryReport, NamesTheRematerializationInProgress) {
  constexpr int64_t n = 1 << 16, bytes = n * 4;
  ScopedBudget lift(std::nullopt);
  evict_everything();
  const Tensor a = from_vector(std::vector<float>(size_t(n), 1.0f));
  const Tensor x = add(a.exp(), a * 2.0);  // exp and mul freed at once; lineage stays
  const int64_t resident = remat::stats().resident_bytes;
  remat::set_memory_budget(resident - bytes / 2);  // x goes
  ASSERT_FALSE(x.storage()->resident());
  // Room for the constants and two more storages: rebuilding x holds both
  // its inputs while its own bytes are requested.
  remat::set_memory_budget(resident - bytes + 2 * bytes + bytes / 2);
  const std::string msg = testing::error_message<OutOfMemoryError>([&] { x.exp(); });
  EXPECT_THAT(msg, HasSubstr("while running op 'exp'"));
  EXPECT_THAT(msg, HasSubstr("during a rematerialization (replaying 'add'"));
  EXPECT_THAT(msg, HasSubstr("Never-evictable floor"));
  EXPECT_THAT(msg, HasSubstr(fmt::format("{} of the locked bytes are held by the rematerialization", 2 * bytes)));
  EXPECT_THAT(msg, HasSubstr("DTR_HEURISTIC="));
  remat::set_memory_budget(std::nullopt);
  EXPECT_TRUE(testing::allclose(x.exp().slice(0, 0, 1), {std::exp(std::exp(1.0) + 2.0)}));
}

// A fill value an integer dtype cannot hold is a ValueError, as PyTorch's
// "value cannot be converted to type int64_t without overflow" (found by the
// dispatch fuzzer as an undefined double-to-int conversion).
TEST(Creation, FillValueMustFitAnIntegerDtype) {
  EXPECT_THROW((void)full({2}, 1e300, kInt64), ValueError);
  EXPECT_THROW((void)full({2}, std::nan(""), kInt32), ValueError);
  EXPECT_THROW((void)full({2}, 3e9, kInt32), ValueError);
  Tensor t = zeros({3}, kInt64);
  EXPECT_THROW(t.fill_(std::numeric_limits<double>::infinity()), ValueError);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));  // unchanged
  EXPECT_EQ(full({2}, -7.0, kInt32).to_vector<int32_t>(), (std::vector<int32_t>{-7, -7}));
  EXPECT_EQ(full({1}, 300.0, kUInt8).to_vector<uint8_t>(), (std::vector<uint8_t>{44}));  // wraps
}

}  // namespace
}  // namespace dtr
