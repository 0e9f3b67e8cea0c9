// Built by .ci/run against `cmake --install` output: checks that the installed
// headers and the exported CMake package are usable from outside the tree.
#include <dtr/dtr.h>

#include <cstdio>

int main() {
  const dtr::Tensor t = dtr::ones({2, 2});
  const float sum = t.sum().item<float>();
  std::printf("dtr::ones({2, 2}).sum() = %g\n", sum);
  return sum == 4.0f ? 0 : 1;
}
