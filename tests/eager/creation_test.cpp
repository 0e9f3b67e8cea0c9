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
