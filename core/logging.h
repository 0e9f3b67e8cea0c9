// spdlog logger for the library; its level comes from DTR_LOG.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include <spdlog/spdlog.h>

namespace dtr {

/// The library's logger ("dtr"), created on first use at DTR_LOG's level.
spdlog::logger& logger();
/// Sets the level: trace, debug, info, warn, error, critical, off. Throws ValueError.
void set_log_level(std::string_view level);

/// Note [debug logging]: the runtime logs budget changes, evictions and
/// rematerializations at debug level. A budgeted step may evict thousands of
/// times, so those lines go through a rate limit (the first `per_second` of
/// each second, then one line saying how many were dropped), and nothing is
/// formatted, nor the clock read, unless the logger's level lets debug lines
/// through: the hot path pays one level check.
class LogRateLimit {
 public:
  explicit LogRateLimit(int64_t per_second) : per_second_(per_second) {}
  /// Whether the line at time `now` may be printed. `dropped` is set to the
  /// number of lines refused in the window that closed when this one opened
  /// a new window (0 otherwise), for the caller to report.
  bool allow(std::chrono::steady_clock::time_point now, int64_t& dropped);

 private:
  int64_t per_second_;
  std::chrono::steady_clock::time_point window_start_{};
  int64_t in_window_ = 0;
  int64_t dropped_ = 0;
};

/// Logs one debug line through `limit` (Note [debug logging]). Not
/// thread-safe in `limit`: callers hold the lock of what they log about.
template <typename... Args>
void debug_rate_limited(LogRateLimit& limit, spdlog::format_string_t<Args...> format,
                        Args&&... args) {
  spdlog::logger& log = logger();
  if (!log.should_log(spdlog::level::debug)) return;
  int64_t dropped = 0;
  if (!limit.allow(std::chrono::steady_clock::now(), dropped)) return;
  if (dropped > 0) log.debug("({} debug lines dropped by the rate limit in the last second)", dropped);
  log.debug(format, std::forward<Args>(args)...);
}

}  // namespace dtr
