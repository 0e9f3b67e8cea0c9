// The backend seam (core/backend.h) and per-device memory (Note [per-device
// memory]), proven with a second device that is not the CPU
// (tests/second_device.h): tensors on two devices at once, separate budgets,
// copies across devices in lineage and in autograd, typed errors.
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "child_process.h"
#include "core/backend.h"
#include "remat/runtime.h"
#include "second_device.h"
#include "testing.h"

namespace dtr {
namespace {

using testing::second_device;

struct TwoDevices : ::testing::Test {
  void SetUp() override {
    dev = second_device();
    remat::Runtime::global().reset_stats();
  }
  void TearDown() override {
    remat::set_memory_budget(dev, std::nullopt);
    remat::set_memory_budget(Device(kCPU), std::nullopt);
    remat::Runtime::global().set_verify(false);
  }
  Device dev;
};

TEST(Device, ParsesEveryTypeAndRejectsTheRest) {
  EXPECT_EQ(Device("cpu"), Device(kCPU));
  EXPECT_EQ(Device("cuda:1"), Device(kCUDA, 1));
  EXPECT_EQ(Device("privateuseone:1"), Device(kPrivateUse1, 1));
  EXPECT_EQ(Device(kPrivateUse1, 1).str(), "privateuseone:1");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cpu:1", "privateuseone:x", ""}) {
    EXPECT_THROW(Device{bad}, ValueError) << bad;
  }
}

TEST(Backend, MissingDevicesAreTypedErrors) {
  second_device();
  const std::string no_cuda =
      testing::error_message<DeviceError>([] { (void)ones({2}).to(Device(kCUDA)); });
  EXPECT_NE(no_cuda.find("cuda:0"), std::string::npos) << no_cuda;
  const std::string past =
      testing::error_message<DeviceError>([] { (void)ones({2}).to(Device(kPrivateUse1, 5)); });
  EXPECT_NE(past.find("privateuseone:5: 2 privateuseone devices present"), std::string::npos) << past;
  EXPECT_THROW(ones({2}, Device(kPrivateUse1, 7)), DeviceError);
  // A factory on a device type with no backend: DeviceError, not a missing kernel.
  EXPECT_THROW(ones({2}, Device(kCUDA)), DeviceError);
  EXPECT_THROW(randn({2}, Device(kCUDA, 1)), DeviceError);
  // The index a user gave is named, also for the CPU.
  const std::string cpu3 = testing::error_message<DeviceError>([] { (void)ones({2}, Device(kCPU, 3)); });
  EXPECT_NE(cpu3.find("cpu:3"), std::string::npos) << cpu3;
  // A misspelled op name is the caller's error, named.
  const std::string typo = testing::error_message<ValueError>([] { (void)op("addd"); });
  EXPECT_NE(typo.find("unknown op 'addd'"), std::string::npos) << typo;
  EXPECT_THROW(remat::set_memory_budget(Device(kCUDA), 1024), DeviceError);
  EXPECT_EQ(default_device(), Device(kCPU));  // no CUDA device here
}

TEST_F(TwoDevices, TensorsLiveOnBothDevicesAtOnce) {
  const Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor b = a.to(dev);
  EXPECT_EQ(b.device(), dev);
  EXPECT_EQ(a.device(), Device(kCPU));
  const Tensor c = mul(b, b);  // runs on the second device
  EXPECT_EQ(c.device(), dev);
  EXPECT_TRUE(testing::allclose(c, {1, 4, 9, 16}));  // to_vector copies through the backend
  const Tensor d = c.to(Device(kCPU));
  EXPECT_EQ(d.device(), Device(kCPU));
  EXPECT_TRUE(testing::bitwise_equal(d, mul(a, a)));
  // Device to device within the type, and created directly on the device.
  const Tensor e = c.to(second_device(1));
  EXPECT_EQ(e.device(), second_device(1));
  EXPECT_TRUE(testing::allclose(e, {1, 4, 9, 16}));
  EXPECT_TRUE(testing::allclose(ones({3}, dev), {1, 1, 1}));
  EXPECT_TRUE(testing::allclose(from_vector<double>({5, 6}, {2}, TensorOptions(kFloat64).device(dev)), {5, 6}));
}

TEST_F(TwoDevices, EachDeviceCountsOnlyItsOwnBytes) {
  auto& alloc = testing::second_device_allocator(0);
  const int64_t cpu_before = remat::stats(Device(kCPU)).resident_bytes;
  const int64_t dev_before = remat::stats(dev).resident_bytes;
  const int64_t live_before = alloc.memory_stats()->allocated_bytes;
  {
    const Tensor x = zeros({1024}, dev);  // 4 KiB on the second device
    EXPECT_EQ(remat::stats(dev).resident_bytes - dev_before, 4096);
    EXPECT_EQ(remat::stats(Device(kCPU)).resident_bytes, cpu_before);
    EXPECT_EQ(alloc.memory_stats()->allocated_bytes - live_before, 4096);  // its own allocator
  }
  EXPECT_EQ(remat::stats(dev).resident_bytes, dev_before);
  EXPECT_EQ(alloc.memory_stats()->allocated_bytes, live_before);
}

// Budgets are per device: filling the second device under a small budget
// evicts there and only there, and values rebuilt there are bitwise those
// of the first computation.
TEST_F(TwoDevices, EvictionForOneDeviceEvictsOnlyThatDevice) {
  NoGradGuard no_grad;
  std::vector<Tensor> on_cpu;
  for (int i = 0; i < 8; ++i) on_cpu.push_back(exp(randn({1024})));  // evictable, on the CPU
  remat::set_memory_budget(dev, 40 * 1024);
  EXPECT_EQ(remat::memory_budget(dev), 40 * 1024);
  EXPECT_EQ(remat::memory_budget(Device(kCPU)), std::nullopt);
  const Tensor src = randn({1024}).to(dev);
  std::vector<Tensor> chain{src};
  for (int i = 0; i < 32; ++i) chain.push_back(exp(mul(chain.back(), 0.5)));  // 4 KiB each
  const remat::Stats d = remat::stats(dev);
  EXPECT_GT(d.evictions, 0);
  EXPECT_LE(d.peak_bytes, 40 * 1024);
  EXPECT_EQ(remat::stats(Device(kCPU)).evictions, 0);
  for (const Tensor& t : on_cpu) EXPECT_TRUE(t.storage()->resident());
  // Rebuilt on the second device from its lineage, bitwise as an unbudgeted run.
  std::vector<std::vector<double>> got;
  for (const Tensor& t : chain) got.push_back(t.to_vector<double>());
  EXPECT_GT(remat::stats(dev).rematerializations, 0);
  remat::set_memory_budget(dev, std::nullopt);
  Tensor again = chain[0];
  for (int i = 1; i <= 32; ++i) {
    again = exp(mul(again, 0.5));
    EXPECT_EQ(got[size_t(i)], again.to_vector<double>()) << i;
  }
}

// A copy evicted on the second device is rebuilt from the CPU tensor
// through the backends' copies (the cross-device op is in lineage).
TEST_F(TwoDevices, ACopyEvictedOnTheDeviceIsRebuiltFromTheHost) {
  NoGradGuard no_grad;
  const Tensor host = randn({1024});
  const std::vector<double> want = host.to_vector<double>();
  const Tensor on_dev = host.to(dev);  // 4 KiB on the device, in lineage
  remat::set_memory_budget(dev, 12 * 1024);
  std::vector<Tensor> filler;
  for (int i = 0; i < 4; ++i) filler.push_back(full({1024}, double(i), dev));
  EXPECT_FALSE(on_dev.storage()->resident());  // the stalest went first
  EXPECT_TRUE(host.storage()->resident());     // the CPU's budget is not the device's
  const int64_t from_host = testing::second_device_counters().from_host.load();
  EXPECT_EQ(on_dev.to_vector<double>(), want);
  EXPECT_GT(testing::second_device_counters().from_host.load(), from_host);
}

TEST_F(TwoDevices, AutogradCrossesTheCopy) {
  Tensor x = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor y = mul(x.to(dev), x.to(dev)).sum();  // on the second device
  EXPECT_EQ(y.device(), dev);
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device(kCPU));
  EXPECT_TRUE(testing::allclose(x.grad(), {2, 4, 6}));
  // And back: a parameter on the device, a loss on the CPU.
  Tensor w = ones({2}, dev).requires_grad_();
  mul(w.to(Device(kCPU)), 3.0).sum().backward();
  EXPECT_EQ(w.grad().device(), dev);
  EXPECT_TRUE(testing::allclose(w.grad(), {3, 3}));
}

TEST_F(TwoDevices, AnOpOnTwoDevicesIsATypedError) {
  const Tensor a = ones({2});
  const Tensor b = ones({2}, dev);
  const std::string msg = testing::error_message<ValueError>([&] { (void)add(a, b); });
  EXPECT_NE(msg.find("same device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("privateuseone:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
}

TEST_F(TwoDevices, BadBudgetsAreTypedErrors) {
  EXPECT_THROW(remat::set_memory_budget(dev, 0), ValueError);
  EXPECT_THROW(remat::set_memory_budget(dev, -5), ValueError);
  EXPECT_THROW(remat::set_memory_budget(Device(kPrivateUse1, 9), 1024), DeviceError);
  EXPECT_EQ(remat::memory_budget(dev), std::nullopt);  // nothing changed
}

// DTR_VERIFY hashes through the backend: the second device's memory is
// read with copy_to_host, and a rematerialization checks out.
TEST_F(TwoDevices, VerifyHashesThroughTheBackend) {
  NoGradGuard no_grad;
  remat::Runtime::global().set_verify(true);
  const Tensor src = randn({1024}).to(dev);
  const int64_t to_host = testing::second_device_counters().to_host.load();
  Tensor a = exp(src);
  EXPECT_GT(testing::second_device_counters().to_host.load(), to_host);  // hashed via a host copy
  remat::set_memory_budget(dev, 12 * 1024);
  std::vector<Tensor> filler;
  for (int i = 0; i < 3; ++i) filler.push_back(exp(mul(src, double(i))));
  EXPECT_FALSE(a.storage()->resident());
  const std::vector<double> got = a.to_vector<double>();  // rematerialized and checked
  EXPECT_EQ(got, exp(src).to_vector<double>());
}

}  // namespace
}  // namespace dtr

namespace dtr {
namespace {

// DTR_MEMORY_BUDGET per device, each form in a fresh process
// (tests/core/devices_child.cpp).
class DeviceBudgets : public ::testing::Test {
 protected:
  std::map<std::string, std::string> run(const std::string& budget) const {
    const auto exe = testing::built_program("tests", "dtr_devices_child");
    EXPECT_TRUE(exe.has_value()) << "dtr_devices_child is built with the tests";
    if (!exe) return {};
    const testing::Output r = testing::run_child(*exe, {}, {{"DTR_MEMORY_BUDGET", budget}});
    EXPECT_EQ(r.exit_code, 0) << r.all();
    std::map<std::string, std::string> m;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      const size_t colon = line.find(": ");
      if (colon != std::string::npos) m[line.substr(0, colon)] = line.substr(colon + 2);
    }
    return m;
  }
};

TEST_F(DeviceBudgets, TheBareFormCapsTheDefaultDeviceOnly) {
  auto s = run("8GiB");
  EXPECT_EQ(s["first"], "ok");
  EXPECT_EQ(s["cpu"], std::to_string(int64_t{8} << 30));  // the CPU: no CUDA device here
  EXPECT_EQ(s["p0"], "none");
  EXPECT_EQ(s["p1"], "none");
}

TEST_F(DeviceBudgets, PerDeviceFormsAndPercentOfEachDevicesOwnMemory) {
  auto s = run("privateuseone:0=50%,privateuseone:1=1MiB,cpu=none");
  EXPECT_EQ(s["first"], "ok");
  EXPECT_EQ(s["p0"], std::to_string(testing::kSecondDeviceMemoryBytes / 2));
  EXPECT_EQ(s["p1"], std::to_string(1 << 20));
  EXPECT_EQ(s["cpu"], "none");
  // "50%" of the CPU is half of its RAM, not of the second device's memory.
  s = run("50%");
  ASSERT_FALSE(s["ram"].empty());
  EXPECT_EQ(s["cpu"], std::to_string(std::stoll(s["ram"]) / 2));
  EXPECT_EQ(s["p0"], "none");
  s = run("2MiB,privateuseone:1=3MiB");
  EXPECT_EQ(s["cpu"], std::to_string(2 << 20));
  EXPECT_EQ(s["p0"], "none");
  EXPECT_EQ(s["p1"], std::to_string(3 << 20));
}

TEST_F(DeviceBudgets, BadFormsAreOneClearErrorAndChangeNothing) {
  for (const char* bad : {"privateuseone:0=0", "gpu:0=1GiB", "cpu=1GiB,cpu=2GiB", "1GiB,2GiB",
                          "8GiB,,cpu=none", "cpu=", "=1GiB"}) {
    auto s = run(bad);
    EXPECT_EQ(s["first"].rfind("ValueError: ", 0), 0u) << bad << ": " << s["first"];
    EXPECT_NE(s["first"].find("DTR_MEMORY_BUDGET"), std::string::npos) << s["first"];
    EXPECT_EQ(s["cpu"], "none") << bad;  // the default (unlimited) stays
    EXPECT_EQ(s["p0"], "none") << bad;
  }
}

TEST_F(TwoDevices, CopyIntoADeviceTensorTakesSourcesFromAnyDevice) {
  // torch.Tensor.copy_ across devices: what loading a checkpoint (read on
  // the CPU) into a model on the device does.
  Tensor d = zeros({3}, dev);
  d.copy_(from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(d.device(), dev);
  EXPECT_TRUE(testing::allclose(d, {1, 2, 3}));
  Tensor c = zeros({3});
  c.copy_(from_vector<double>({4, 5, 6}, {3}, TensorOptions(kFloat64).device(second_device(1))));
  EXPECT_TRUE(testing::allclose(c, {4, 5, 6}));

  nn::Linear on_device(2, 2);
  on_device->to(dev);
  nn::Linear on_cpu(2, 2);
  on_device->load_state_dict(on_cpu->state_dict());
  EXPECT_EQ(on_device->weight.device(), dev);
  EXPECT_TRUE(testing::bitwise_equal(on_device->weight.to(Device(kCPU)), on_cpu->weight));
  EXPECT_TRUE(testing::bitwise_equal(on_device->bias.to(Device(kCPU)), on_cpu->bias));
}

TEST(Backend, TheDefaultDeviceCanBeSetAndRestored) {
  // What init_process_group("nccl") does for its rank's device.
  EXPECT_EQ(default_device(), Device(kCPU));  // no CUDA device here
  set_default_device(second_device(1));
  EXPECT_EQ(default_device(), second_device(1));
  EXPECT_THROW(set_default_device(Device(kPrivateUse1, 9)), DeviceError);
  EXPECT_EQ(default_device(), second_device(1));  // unchanged by the refusal
  set_default_device(std::nullopt);
  EXPECT_EQ(default_device(), Device(kCPU));
}

}  // namespace
}  // namespace dtr
