#include "core/logging.h"

#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/absl_compat.h"
#include "core/error.h"
#include "core/options.h"

namespace dtr {
namespace {

/// The lower-case level name as DTR_LOG accepts it; throws ValueError otherwise.
std::string checked_level_name(std::string_view name) {
  absl::StatusOr<std::string> level = parse_log_level(name);
  if (!level.ok()) {
    throw ValueError(fmt::format("{}; accepted levels: trace, debug, info, warn, error, "
                                 "critical, off",
                                 level.status().message()));
  }
  return *std::move(level);
}

std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("dtr", std::move(sink));
  logger->set_pattern("[%H:%M:%S.%e] [dtr] [%^%l%$] %v");
  logger->set_level(spdlog::level::from_str(checked_level_name(global_options().log_level)));
  // Visible to spdlog::get("dtr") unless the application registered its own.
  if (spdlog::get("dtr") == nullptr) {
    try {
      spdlog::register_logger(logger);
    } catch (const spdlog::spdlog_ex&) {
      // Registered concurrently by someone else: keep ours unregistered.
    }
  }
  return logger;
}

}  // namespace

spdlog::logger& logger() {
  // Deliberately never destroyed, so that code running during static
  // destruction can still log.
  static auto* const instance = new std::shared_ptr<spdlog::logger>(make_logger());
  return **instance;
}

bool LogRateLimit::allow(std::chrono::steady_clock::time_point now, int64_t& dropped) {
  dropped = 0;
  if (now - window_start_ >= std::chrono::seconds(1)) {
    dropped = dropped_;
    dropped_ = 0;
    in_window_ = 0;
    window_start_ = now;
  }
  if (in_window_ < per_second_) {
    ++in_window_;
    return true;
  }
  ++dropped_;
  return false;
}

void set_log_level(std::string_view level) {
  std::string name = checked_level_name(level);
  logger().set_level(spdlog::level::from_str(name));
  global_options().log_level = std::move(name);
}

}  // namespace dtr
