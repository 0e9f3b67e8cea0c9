// torch::cuda: whether CUDA devices are present, how many, their seeds and
// synchronization, asked of the CUDA backend through the backend registry
// (core/backend.h). Without the CUDA backend, a driver or a device,
// is_available() is false and device_count() 0; nothing here aborts.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtr::cuda {

/// CUDA devices present (torch::cuda::device_count): 0 when dtr was built
/// without the CUDA backend or no driver or device is found.
size_t device_count();
/// device_count() > 0 (torch::cuda::is_available).
bool is_available();
/// Seeds the generator CUDA random ops draw from (torch::cuda::manual_seed,
/// manual_seed_all). dtr has one Philox generator for every device, so with
/// a CUDA device present this is dtr::manual_seed(seed), which also reseeds
/// CPU draws; without one it does nothing, as libtorch's.
void manual_seed(uint64_t seed);
void manual_seed_all(uint64_t seed);
/// Waits for the work queued on CUDA device `device_index` (-1: the
/// current default, device 0) (torch::cuda::synchronize). Throws
/// DeviceError when there is no such device.
void synchronize(int64_t device_index = -1);

}  // namespace dtr::cuda
