// Debian's Abseil (libabsl-dev 20220623) is built with its own
// absl::string_view class rather than an alias of std::string_view, so the two
// do not convert implicitly and fmt cannot format absl::string_view (e.g.
// absl::Status::message()). These helpers bridge the two in either build.
#pragma once

#include <string_view>

#include <absl/strings/string_view.h>
#include <fmt/format.h>

namespace dtr {

inline absl::string_view to_absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view to_std(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace dtr

#ifndef ABSL_USES_STD_STRING_VIEW
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(dtr::to_std(s), ctx);
  }
};
#endif
