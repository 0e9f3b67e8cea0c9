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
