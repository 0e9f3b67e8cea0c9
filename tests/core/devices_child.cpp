// A child process for tests/core/backend_test.cpp: DTR_MEMORY_BUDGET is
// read once per process, so each form is tried in a fresh one. Registers
// the test's second device, runs one op, and prints the budget of each
// device, one `key: value` line each:
//
//   first:  ok, or ValueError: <what()> (on one line)
//   cpu:    <bytes> or none
//   p0, p1: the same for privateuseone:0 and privateuseone:1
//   ram:    the CPU's memory in bytes (what "60%" of the CPU is taken of)
#include <cstdio>
#include <string>

#include <dtr/dtr.h>

#include "../second_device.h"

namespace {

std::string one_line(const char* what) {
  std::string s;
  for (const char* c = what; *c != '\0'; ++c) s += *c == '\n' ? std::string(" | ") : std::string(1, *c);
  return s;
}

std::string budget(dtr::Device d) {
  const auto b = dtr::remat::memory_budget(d);
  return b ? std::to_string(*b) : std::string("none");
}

}  // namespace

int main() {
  dtr::testing::second_device();
  try {
    (void)dtr::ones({1});
    std::printf("first: ok\n");
  } catch (const dtr::ValueError& e) {
    std::printf("first: ValueError: %s\n", one_line(e.what()).c_str());
  }
  std::printf("cpu: %s\n", budget(dtr::Device(dtr::kCPU)).c_str());
  std::printf("p0: %s\n", budget(dtr::testing::second_device(0)).c_str());
  std::printf("p1: %s\n", budget(dtr::testing::second_device(1)).c_str());
  std::printf("ram: %lld\n",
              (long long)dtr::backend(dtr::Device(dtr::kCPU)).memory_bytes(0));
  return 0;
}
