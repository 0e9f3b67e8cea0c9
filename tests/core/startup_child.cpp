// A child process for tests/core/startup_test.cpp: start-up happens once per
// process, so each environment it is tried under needs a fresh one. Runs a
// fixed script and prints one `key: value` line per step; the test sets the
// DTR_* variables and reads the lines.
//
//   first:     the first op (ok <value>, or <error type>: <what()>, on one line)
//   second:    the same op again, no setter called
//   options:   the options in force then
//   setters:   set_memory_budget(1 MiB), set_heuristic(lru), set_log_level(warn)
//   third:     ops that evict under that budget (ok <value> <evictions>)
//   options:   the options in force at the end
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <dtr/dtr.h>

#include "core/logging.h"

namespace {

/// `what` on one line: line breaks become " | ".
std::string one_line(const char* what) {
  std::string s;
  for (const char* c = what; *c != '\0'; ++c) s += *c == '\n' ? std::string(" | ") : std::string(1, *c);
  return s;
}

/// Runs `body` and prints `key: ok <what body returned>` or the error.
void step(const char* key, const std::function<std::string()>& body) {
  std::string result;
  try {
    result = "ok " + body();
  } catch (const dtr::ValueError& e) {
    result = "ValueError: " + one_line(e.what());
  } catch (const dtr::InternalError& e) {
    result = "InternalError: " + one_line(e.what());
  } catch (const std::exception& e) {
    result = "other error: " + one_line(e.what());
  }
  std::printf("%s: %s\n", key, result.c_str());
  std::fflush(stdout);
}

std::string one_op() {
  const dtr::Tensor x = dtr::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  return std::to_string((x * 2).sum().item<float>());
}

std::string options_in_force() {
  auto& rt = dtr::remat::Runtime::global();
  const std::optional<int64_t> budget = rt.memory_budget();
  return "budget " + (budget ? std::to_string(*budget) : std::string("none")) + " heuristic " +
         std::string(dtr::heuristic_name(rt.heuristic())) + " log " +
         std::to_string(int(dtr::logger().level()));
}

}  // namespace

int main() {
  step("first", one_op);
  step("second", one_op);
  step("options", options_in_force);
  step("setters", [] {
    dtr::remat::set_memory_budget(int64_t(1) << 20);
    dtr::remat::Runtime::global().set_heuristic(dtr::Heuristic::kLru);
    dtr::set_log_level("warn");
    return std::string();
  });
  step("third", [] {
    dtr::manual_seed(0);
    // Twelve 256 KiB results held at once under a 1 MiB budget: most are
    // evicted and rebuilt for the sum.
    std::vector<dtr::Tensor> held;
    dtr::Tensor x = dtr::ones({65536});
    for (int i = 0; i < 12; ++i) held.push_back(x = x * 1.5);
    double total = 0;
    for (const dtr::Tensor& t : held) total += t.sum().item<float>();
    return std::to_string(total) + " evictions " + std::to_string(dtr::remat::stats().evictions);
  });
  step("options", options_in_force);
  return 0;
}
