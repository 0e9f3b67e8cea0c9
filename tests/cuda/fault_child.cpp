// A fresh process that makes a CUDA kernel fault (Note [lost devices]): a
// tensor imported through DLPack at an address no process maps (0x1000, below
// Linux's mmap_min_addr) is read by `add` on cuda:0, an illegal address. A
// fault loses the context for the whole process, so it runs here, not in
// the test binary (tests/cuda/cuda_backend_test.cpp,
// CudaGpu.AnIllegalAddressLosesTheDeviceWithOneClearError). Prints what each
// step raised; exit 0 when each step behaved, 1 when one did not, 3 without
// a CUDA device.
#include <cstdint>
#include <cstdio>
#include <string>

#include <dlpack/dlpack.h>

#include "core/backend.h"
#include "dtr/dtr.h"
#include "eager/dlpack.h"

int main() {
  using namespace dtr;
  const Backend* cuda = find_backend(kCUDA);
  if (cuda == nullptr || cuda->device_count() == 0) {
    std::printf("no CUDA device\n");
    return 3;
  }
  const Device dev(kCUDA, 0);
  const Tensor good = ones({4}, TensorOptions().device(dev));
  (void)good.sum().item<float>();  // the context is up and works

  static int64_t shape[1] = {int64_t{1} << 20};
  static DLManagedTensor m{};
  m.dl_tensor.data = reinterpret_cast<void*>(uintptr_t{0x1000});
  m.dl_tensor.device = DLDevice{kDLCUDA, 0};
  m.dl_tensor.ndim = 1;
  m.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  m.dl_tensor.shape = shape;
  const Tensor bad = from_dlpack(&m);

  int wrong = 0;
  try {
    const Tensor r = add(bad, bad);
    (void)r.sum().item<float>();
    std::printf("fault: none raised\n");
    ++wrong;
  } catch (const DeviceError& e) {
    std::printf("fault: %s\n", e.what());
  }
  if (!device_lost(dev)) {
    std::printf("lost: the device is not marked lost\n");
    ++wrong;
  }
  try {
    (void)add(good, good);
    std::printf("later: an op ran on the lost device\n");
    ++wrong;
  } catch (const DeviceError& e) {
    std::printf("later: %s\n", e.what());
  }
  try {
    const Tensor c = add(ones({2}), ones({2}));
    std::printf("cpu: %g\n", c.sum().item<double>());
  } catch (const std::exception& e) {
    std::printf("cpu: %s\n", e.what());
    ++wrong;
  }
  return wrong == 0 ? 0 : 1;
}
