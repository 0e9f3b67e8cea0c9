// Factory functions (eager/ops/creation.cpp): PyTorch's default dtypes, shape
// overflow checks, and from_blob's borrowed buffers under a budget
// (Note [borrowed storage]).
#include <cmath>
#include <cstddef>
#include <cstdint>
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

}  // namespace
}  // namespace dtr
