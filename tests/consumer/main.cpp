// Built by .ci/run against `cmake --install` output: checks that the installed
// headers and the exported CMake package are usable from outside the tree.
#include <dtr/dtr.h>
#include <dtr/eager/tensor.h>  // every public header is reachable under dtr/

// Only include/ is on the include path: the library's folders do not land
// there bare, where they could clash with a project's own core/ or eager/.
#if __has_include("core/dtype.h") || __has_include("eager/tensor.h") || __has_include("remat/runtime.h")
#error "dtr's headers are on the include path outside dtr/"
#endif

#include <cstdio>

int main() {
  const dtr::Tensor t = dtr::ones({2, 2});
  const float sum = t.sum().item<float>();
  std::printf("dtr::ones({2, 2}).sum() = %g\n", sum);
  return sum == 4.0f ? 0 : 1;
}
