#include "core/op_registry.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dtr {
namespace {

OpDef row(const char* name) {
  OpDef def;
  def.name = name;
  return def;
}

TEST(OpRegistry, ANameIsDefinedOnce) {
  OpRegistry registry;
  registry.define(row("a"));
  EXPECT_THROW(registry.define(row("a")), InternalError);
}

// eager/ops/init.cpp: a registration that throws part way takes its rows out
// again, so that the retry defines them afresh instead of failing with
// "defined twice".
TEST(OpRegistry, TruncateUndoesAPartialRegistration) {
  OpRegistry registry;
  registry.define(row("a"));
  registry.define(row("b"));
  registry.define(row("c"));
  registry.truncate(1);
  ASSERT_EQ(registry.ops().size(), 1u);
  EXPECT_NE(registry.find("a"), nullptr);
  EXPECT_EQ(registry.find("b"), nullptr);
  EXPECT_EQ(registry.define(row("b")).id, 1);
  EXPECT_EQ(registry.define(row("c")).id, 2);
  registry.truncate(5);  // beyond the end: nothing to undo
  EXPECT_EQ(registry.ops().size(), 3u);
}

}  // namespace
}  // namespace dtr
