// The CUDA backend without a GPU, and its kernels under host emulation
// (Note [host emulation of CUDA kernels]). With a device present the GPU
// checks of scripts/gpu-check.sh run instead of the no-device ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "dtr/dtr.h"
#include "second_device.h"
#include "tests/testing.h"

// Only with the backend: cuda/libraries.h includes the toolkit's cuBLAS and
// cuDNN headers, which a machine without the toolkit lacks.
#if DTR_HAVE_CUDA
#include <thread>

#include "cuda/exec.h"
#include "cuda/libraries.h"
#include "cuda/runtime.h"
#include "tests/child_process.h"
#endif

namespace dtr {
namespace {

#if DTR_HAVE_CUDA

int cuda_devices() { return find_backend(kCUDA)->device_count(); }

TEST(CudaBackend, IsRegisteredWithOrWithoutADevice) {
  const Backend* b = find_backend(kCUDA);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "cuda");
  EXPECT_FALSE(b->host_accessible);
  EXPECT_GE(b->device_count(), 0);
}

/// Whether a shared object whose path contains `name` is mapped into this process.
bool library_mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(name) != std::string::npos) return true;
  return false;
}

TEST(CudaBackend, CublasIsLoadedOnFirstUseWithEverySymbol) {
  // Without a device nothing has multiplied on one, so nothing loaded cuBLAS:
  // the library is not linked (cuda/libraries.h).
  if (cuda_devices() == 0) {
    EXPECT_FALSE(library_mapped("libcublas")) << "libcublas is mapped before first use";
  }
  const cuda::Cublas& api = cuda::cublas();
  EXPECT_TRUE(library_mapped("libcublas"));
  for (const void* fn : {reinterpret_cast<const void*>(api.create), reinterpret_cast<const void*>(api.set_stream),
                         reinterpret_cast<const void*>(api.set_workspace),
                         reinterpret_cast<const void*>(api.set_math_mode),
                         reinterpret_cast<const void*>(api.set_atomics_mode),
                         reinterpret_cast<const void*>(api.set_pointer_mode),
                         reinterpret_cast<const void*>(api.get_status_string),
                         reinterpret_cast<const void*>(api.sgemm_strided_batched),
                         reinterpret_cast<const void*>(api.dgemm_strided_batched),
                         reinterpret_cast<const void*>(api.gemm_strided_batched_ex)})
    EXPECT_NE(fn, nullptr);
  EXPECT_STREQ(api.get_status_string(CUBLAS_STATUS_NOT_SUPPORTED), "the requested functionality is not supported");
  EXPECT_EQ(&cuda::cublas(), &api);  // loaded once
}

TEST(CudaBackend, WithoutADeviceToCudaIsADeviceErrorAndTheCpuWorks) {
  if (cuda_devices() > 0) GTEST_SKIP() << "a CUDA device is present: scripts/gpu-check.sh tests it";
  Tensor x = ones({2, 3});
  try {
    (void)x.to(Device(kCUDA));
    FAIL() << "to(cuda) without a device did not throw";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0: 0 cuda devices present"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)zeros({4}, TensorOptions().device(Device(kCUDA))), DeviceError);
  // Nothing CPU-side is disturbed: the default device is the CPU.
  EXPECT_EQ(default_device(), Device(kCPU));
  EXPECT_EQ((x + x).sum().item<float>(), 12.0f);
}

TEST(CudaBackend, StickyErrorsAreTheFaultsThatLoseTheContext) {
  // Note [lost devices]: CUDA's documented sticky errors, and no others.
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorMisalignedAddress, cudaErrorIllegalInstruction,
                        cudaErrorAssert, cudaErrorLaunchFailure, cudaErrorHardwareStackError,
                        cudaErrorECCUncorrectable}) {
    EXPECT_TRUE(cuda::is_sticky_error(e)) << int(e);
  }
  for (cudaError_t e : {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorNotReady,
                        cudaErrorInvalidConfiguration, cudaErrorNoDevice, cudaErrorInsufficientDriver}) {
    EXPECT_FALSE(cuda::is_sticky_error(e)) << int(e);
  }
}

TEST(CudaLaunch, OneIndexPerThreadUpToTheGridCap) {
  EXPECT_EQ(cuda::launch_blocks(0), 0u);
  EXPECT_EQ(cuda::launch_blocks(-3), 0u);
  EXPECT_EQ(cuda::launch_blocks(1), 1u);
  EXPECT_EQ(cuda::launch_blocks(cuda::kThreadsPerBlock), 1u);
  EXPECT_EQ(cuda::launch_blocks(cuda::kThreadsPerBlock + 1), 2u);
  EXPECT_EQ(cuda::launch_blocks(int64_t{1} << 28), unsigned(cuda::kMaxBlocks));  // exactly the cap
  EXPECT_EQ(cuda::launch_blocks(int64_t{1} << 40), unsigned(cuda::kMaxBlocks));  // grid-stride beyond
}

// Every row that has a CPU kernel has a CUDA one (its own, or one for
// every device, as the collectives'): a model runs on cuda:N wherever it
// runs on the CPU.
TEST(CudaBackend, EveryRowWithACpuKernelHasACudaKernel) {
  (void)zeros({1});  // the rows are registered
  const std::vector<std::string> cuda_ops = cuda::ops_with_cuda_kernels();
  int rows = 0;
  std::vector<std::string> missing;
  for (const auto& row : OpRegistry::instance().ops()) {
    if (row->kernels[size_t(kCPU)] == nullptr) continue;
    ++rows;
    if (row->kernels[size_t(kCUDA)] == nullptr &&
        !std::binary_search(cuda_ops.begin(), cuda_ops.end(), row->name))
      missing.push_back(row->name);
  }
  EXPECT_GT(rows, 100);
  EXPECT_TRUE(missing.empty()) << missing.size() << " of " << rows << " rows without a CUDA kernel, the first: "
                               << (missing.empty() ? std::string() : missing.front());
}

// ---- the kernels under host emulation ---------------------------------------------

TEST(CudaEmulation, BindsEveryCudaKernelThatRunsWithoutALibraryCall) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const std::vector<std::string>& bound = testing::second_device_cuda_ops();
  for (const char* op : {"add", "mul_scalar", "where", "to_dtype", "rand", "gelu_backward"})
    EXPECT_TRUE(std::binary_search(bound.begin(), bound.end(), std::string(op))) << op;
  const std::vector<std::string> all = cuda::ops_with_cuda_kernels();
  EXPECT_LE(bound.size(), all.size());
  // Every primitive row's kernel on the test device is the CUDA one where
  // the CUDA backend has an emulatable kernel.
  for (const std::string& op : bound) {
    const OpDef& row = OpRegistry::instance().get(op);
    EXPECT_EQ(row.kernels[size_t(kPrivateUse1)], row.kernels[size_t(kCUDA)]) << op;
  }
}

TEST(CudaEmulation, BroadcastingStridedMixedDtypeBinaryMatchesTheCpu) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const Device d = testing::second_device();
  Tensor a = arange(0, 24, 1, TensorOptions(kFloat32)).reshape({2, 3, 4}).transpose(0, 2);  // (4, 3, 2) strided
  Tensor b = arange(1, 3, 1, TensorOptions(kInt64)).reshape({1, 1, 2});
  Tensor cpu = a * b + 0.5;
  Tensor dev = (a.to(d) * b.to(d) + 0.5).to(Device(kCPU));
  EXPECT_EQ(dev.dtype(), kFloat32);
  EXPECT_TRUE(testing::bitwise_equal(dev, cpu));
}

TEST(CudaEmulation, PhiloxDrawsAreTheCpusBitForBit) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const Device d = testing::second_device();
  manual_seed(1234);
  Tensor cpu_u = rand({1000});
  Tensor cpu_i = randint(-5, 7, {1000});
  manual_seed(1234);
  Tensor dev_u = rand({1000}, TensorOptions().device(d)).to(Device(kCPU));
  Tensor dev_i = randint(-5, 7, {1000}, TensorOptions().device(d)).to(Device(kCPU));
  EXPECT_TRUE(testing::bitwise_equal(dev_u, cpu_u));
  EXPECT_TRUE(testing::bitwise_equal(dev_i, cpu_i));
  // Normal draws: the same Philox bits through Box-Muller; glibc's log and
  // cos against CUDA's agree to float32 rounding.
  manual_seed(99);
  Tensor cpu_n = randn({1000});
  manual_seed(99);
  Tensor dev_n = randn({1000}, TensorOptions().device(d)).to(Device(kCPU));
  EXPECT_TRUE(testing::allclose(dev_n, cpu_n.to_vector<double>(), 1e-6, 1e-6));
}

// ---- on a GPU (scripts/gpu-check.sh; skipped without one) ----------------------------

#define SKIP_WITHOUT_A_GPU() \
  if (cuda_devices() == 0) GTEST_SKIP() << "no CUDA device"

/// Loss after each of `steps` SGD steps of a 2-layer MLP on `device`, from
/// seed 7 (weights and data made on the CPU, then moved).
std::vector<double> train_mlp(Device device, int steps, std::optional<int64_t> budget) {
  manual_seed(7);
  auto l1 = nn::Linear(64, 128);
  auto l2 = nn::Linear(128, 10);
  l1->to(device);
  l2->to(device);
  const Tensor x = randn({256, 64}).to(device);
  const Tensor y = randint(0, 10, {256}).to(device);
  std::vector<Tensor> params = l1->parameters();
  for (const Tensor& p : l2->parameters()) params.push_back(p);
  optim::SGD opt(params, optim::SGDOptions(0.1));
  remat::set_memory_budget(device, budget);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    const Tensor loss = cross_entropy(l2->forward(relu(l1->forward(x))), y);
    losses.push_back(loss.item<double>());
    loss.backward();
    opt.step();
  }
  remat::set_memory_budget(device, std::nullopt);
  return losses;
}

TEST(CudaGpu, AModelTrainsAcrossToCudaAsOnTheCpu) {
  SKIP_WITHOUT_A_GPU();
  const std::vector<double> cpu = train_mlp(Device(kCPU), 5, std::nullopt);
  const std::vector<double> gpu = train_mlp(Device(kCUDA), 5, std::nullopt);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * std::abs(cpu[i])) << "step " << i;
  EXPECT_LT(gpu.back(), gpu.front());
}

TEST(CudaGpu, UnderABudgetTheLossesAreBitwiseTheUnlimitedRuns) {
  SKIP_WITHOUT_A_GPU();
  const std::vector<double> free_run = train_mlp(Device(kCUDA), 4, std::nullopt);
  const int64_t peak = remat::Runtime::global().stats(Device(kCUDA)).peak_bytes;
  remat::reset_stats();
  const std::vector<double> budgeted = train_mlp(Device(kCUDA), 4, peak / 2);
  EXPECT_EQ(budgeted, free_run);
  EXPECT_GT(remat::Runtime::global().stats(Device(kCUDA)).evictions, 0);
}

TEST(CudaGpu, TheCachingAllocatorAccountsTheDevicesMemory) {
  SKIP_WITHOUT_A_GPU();
  Tensor t = zeros({1 << 20}, TensorOptions().device(Device(kCUDA)));  // 4 MiB
  const remat::Stats s = remat::Runtime::global().stats(Device(kCUDA));
  EXPECT_GE(s.allocated_bytes, int64_t{4} << 20);
  EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
  EXPECT_EQ(t.sum().item<float>(), 0.0f);
}

TEST(CudaGpu, ThreadsGetTheirOwnLibraryHandles) {
  SKIP_WITHOUT_A_GPU();  // Note [library handles per thread]
  const cublasHandle_t mine = cuda::cublas_handle(0);
  EXPECT_EQ(cuda::cublas_handle(0), mine);
  const cudnnHandle_t my_cudnn = cuda::cudnn_handle(0);
  cublasHandle_t theirs = nullptr;
  cudnnHandle_t their_cudnn = nullptr;
  std::thread([&] {
    theirs = cuda::cublas_handle(0);
    their_cudnn = cuda::cudnn_handle(0);
  }).join();
  EXPECT_NE(theirs, nullptr);
  EXPECT_NE(theirs, mine);
  EXPECT_NE(their_cudnn, my_cudnn);
}

// Note [lost devices], in a fresh process (tests/cuda/fault_child.cpp): a
// kernel that reads an illegal address, with DTR_CUDA_SYNC=1, raises one
// DeviceError naming its op; every later op on the device raises the lost
// device's error; the CPU goes on.
TEST(CudaGpu, AnIllegalAddressLosesTheDeviceWithOneClearError) {
  SKIP_WITHOUT_A_GPU();
  const auto exe = testing::built_program("tests", "dtr_fault_child");
  ASSERT_TRUE(exe.has_value()) << "dtr_fault_child is built with the tests";
  const testing::Output r = testing::run_child(*exe, {}, {{"DTR_CUDA_SYNC", "1"}});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_NE(r.out.find("fault: cuda:0 is lost"), std::string::npos) << r.all();
  EXPECT_NE(r.out.find("in op add"), std::string::npos) << r.all();
  EXPECT_NE(r.out.find("later: cuda:0 is lost"), std::string::npos) << r.all();
  EXPECT_NE(r.out.find("cpu: 4"), std::string::npos) << r.all();
}

#else

TEST(CudaBackend, NotBuilt) { GTEST_SKIP() << "built without the CUDA backend (DTR_CUDA=OFF or no nvcc)"; }

#endif

}  // namespace
}  // namespace dtr
