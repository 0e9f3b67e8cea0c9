#include "eager/cuda.h"

#include "core/backend.h"
#include "core/error.h"
#include "eager/random.h"

namespace dtr::cuda {

size_t device_count() {
  const Backend* b = find_backend(kCUDA);
  if (b == nullptr) return 0;
  const int n = b->device_count();
  return n > 0 ? size_t(n) : 0;
}

bool is_available() { return device_count() > 0; }

void manual_seed(uint64_t seed) {
  if (is_available()) dtr::manual_seed(seed);
}

void manual_seed_all(uint64_t seed) { manual_seed(seed); }

void synchronize(int64_t device_index) {
  const int64_t index = device_index < 0 ? 0 : device_index;
  const size_t n = device_count();
  DTR_CHECK(index < int64_t(n), DeviceError, "cuda::synchronize: cuda:{} does not exist ({} CUDA device{} present)",
            index, n, n == 1 ? "" : "s");
  const Backend& b = backend(Device(kCUDA, int(index)));
  if (b.synchronize != nullptr) b.synchronize(int(index));
}

}  // namespace dtr::cuda
