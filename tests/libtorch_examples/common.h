// Helpers shared by the example programs: the size arguments and the check
// that training reduced a loss. Plain C++, no tensor library.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace examples {

/// argv[i] as a positive integer, or `fallback` when absent; exits 2 on a
/// malformed value.
inline long arg_or(int argc, char** argv, int i, long fallback) {
  if (i >= argc) return fallback;
  char* end = nullptr;
  const long v = std::strtol(argv[i], &end, 10);
  if (end == argv[i] || *end != '\0' || v <= 0) {
    std::fprintf(stderr, "%s: argument %d must be a positive integer, got '%s'\n", argv[0], i, argv[i]);
    std::exit(2);
  }
  return v;
}

/// The mean of the first (last) at most n values; NaN for none.
inline double mean_of_first(const std::vector<double>& v, size_t n) {
  const size_t k = v.size() < n ? v.size() : n;
  double s = 0;
  for (size_t i = 0; i < k; ++i) s += v[i];
  return k ? s / double(k) : 0.0 / 0.0;
}
inline double mean_of_last(const std::vector<double>& v, size_t n) {
  const size_t k = v.size() < n ? v.size() : n;
  double s = 0;
  for (size_t i = v.size() - k; i < v.size(); ++i) s += v[i];
  return k ? s / double(k) : 0.0 / 0.0;
}

/// Prints the verdict and returns main's exit status: 0 when `last` is
/// below `first`.
inline int report(const char* program, const char* what, double first, double last) {
  const bool ok = last < first;
  std::printf("%s: %s %.6f -> %.6f: %s\n", program, what, first, last, ok ? "reduced" : "NOT REDUCED");
  return ok ? 0 : 1;
}

}  // namespace examples
