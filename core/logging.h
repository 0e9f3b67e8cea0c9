// spdlog logger for the library; its level comes from DTR_LOG.
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace dtr {

/// The library's logger ("dtr"), created on first use at DTR_LOG's level.
spdlog::logger& logger();
/// Sets the level: trace, debug, info, warn, error, critical, off. Throws ValueError.
void set_log_level(std::string_view level);

}  // namespace dtr
