#include "core/logging.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/options.h"

namespace dtr {
namespace {

TEST(Logging, LoggerIsNamedAndRegistered) {
  EXPECT_EQ(logger().name(), "dtr");
  EXPECT_EQ(spdlog::get("dtr").get(), &logger());
}

TEST(Logging, SetLogLevel) {
  set_log_level("debug");
  EXPECT_EQ(logger().level(), spdlog::level::debug);
  EXPECT_EQ(global_options().log_level, "debug");
  set_log_level("WARN");
  EXPECT_EQ(logger().level(), spdlog::level::warn);
  EXPECT_EQ(global_options().log_level, "warn");
  set_log_level("off");
  EXPECT_EQ(logger().level(), spdlog::level::off);
  set_log_level("warn");
}

TEST(LogRateLimit, FirstLinesOfEachSecondThenTheCountOfTheRest) {
  using std::chrono::milliseconds;
  LogRateLimit limit(3);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t dropped = -1;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limit.allow(t0 + milliseconds(i), dropped));
    EXPECT_EQ(dropped, 0);
  }
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limit.allow(t0 + milliseconds(10 + i), dropped));
  // A new second: the line goes through and says how many were refused.
  EXPECT_TRUE(limit.allow(t0 + milliseconds(1000), dropped));
  EXPECT_EQ(dropped, 5);
  EXPECT_TRUE(limit.allow(t0 + milliseconds(1001), dropped));
  EXPECT_EQ(dropped, 0);
  EXPECT_TRUE(limit.allow(t0 + milliseconds(1002), dropped));
  EXPECT_FALSE(limit.allow(t0 + milliseconds(1003), dropped));
  // Lines that came after a quiet spell: nothing was dropped in between.
  EXPECT_TRUE(limit.allow(t0 + milliseconds(5000), dropped));
  EXPECT_EQ(dropped, 1);
}

TEST(Logging, BadLevelThrowsAndKeepsTheOldOne) {
  set_log_level("error");
  try {
    set_log_level("loud");
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("\"loud\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("critical"), std::string::npos) << e.what();
  }
  EXPECT_EQ(logger().level(), spdlog::level::err);
  EXPECT_EQ(global_options().log_level, "error");
  set_log_level("warn");
}

}  // namespace
}  // namespace dtr
