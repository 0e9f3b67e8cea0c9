// Note [lost devices]: a sticky fault of a kernel on the test device (as a
// CUDA illegal address would be) gives one clear DeviceError naming the op
// that faulted; every later op and copy on that device gives the DeviceError
// of a lost device; the CPU and the other device go on, the runtime's
// accounts stay consistent, and nothing aborts.
#include <gtest/gtest.h>

#include <string>

#include "core/logging.h"
#include "dtr/dtr.h"
#include "second_device.h"
#include "testing.h"

namespace dtr {
namespace {

/// Forgets the lost state whatever the test does (the test device can
/// recover; a CUDA context cannot).
struct RecoverOnExit {
  Device device;
  ~RecoverOnExit() { clear_device_lost(device); }
};

TEST(LostDevice, AStickyFaultNamesItsOpAndLosesOnlyThatDevice) {
  const Device dev = testing::second_device(0);
  const Device other = testing::second_device(1);
  RecoverOnExit recover{dev};
  const Tensor a = from_vector<float>({1, 2, 3}, {3}, TensorOptions().device(dev));
  const Tensor b = from_vector<float>({4, 5, 6}, {3}, TensorOptions().device(dev));
  const int64_t resident_before = remat::stats(dev).resident_bytes;

  testing::inject_sticky_fault(dev.index, "mul");
  const std::string first = testing::error_message<DeviceError>([&] { (void)mul(a, b); });
  EXPECT_NE(first.find("privateuseone:0 is lost"), std::string::npos) << first;
  EXPECT_NE(first.find("illegal memory access"), std::string::npos) << first;
  EXPECT_NE(first.find("in op mul"), std::string::npos) << first;
  EXPECT_NE(first.find("DTR_CUDA_SYNC=1"), std::string::npos) << first;
  EXPECT_TRUE(device_lost(dev));
  // The failed op's output was freed: nothing leaked, nothing is locked.
  EXPECT_EQ(remat::stats(dev).resident_bytes, resident_before);

  // Every later op on the device: the same one error, naming the first fault.
  const std::string later = testing::error_message<DeviceError>([&] { (void)add(a, b); });
  EXPECT_NE(later.find("privateuseone:0 is lost"), std::string::npos) << later;
  EXPECT_NE(later.find("in op mul"), std::string::npos) << later;
  // Copies too, both ways.
  EXPECT_THROW((void)a.to(Device(kCPU)), DeviceError);
  EXPECT_THROW((void)ones({2}).to(dev), DeviceError);

  // The CPU and the other device work.
  EXPECT_TRUE(testing::allclose(add(ones({2}), ones({2})), {2, 2}));
  const Tensor c = from_vector<float>({1, 2}, {2}, TensorOptions().device(other));
  EXPECT_TRUE(testing::allclose(mul(c, c), {1, 4}));
  EXPECT_FALSE(device_lost(other));

  // Recovered (the test device only), the tensors made before are intact.
  clear_device_lost(dev);
  EXPECT_TRUE(testing::allclose(add(a, b), {5, 7, 9}));
}

TEST(LostDevice, AFaultDuringARematerializationIsTheSameClearError) {
  const Device dev = testing::second_device(0);
  RecoverOnExit recover{dev};
  struct Unlimited {
    Device d;
    ~Unlimited() { remat::set_memory_budget(d, std::nullopt); }
  } unlimited{dev};
  const Tensor x = from_vector<float>(std::vector<float>(1024, 2.0f), {1024}, TensorOptions().device(dev));
  Tensor y = mul(x, x);  // 4 KiB, replayable
  Tensor z = add(y, x);
  // A budget of one byte evicts everything evictable (y and z), with a warning.
  const int64_t evictions = remat::stats(dev).evictions;
  spdlog::logger& log = logger();
  const auto level = log.level();
  log.set_level(spdlog::level::err);
  remat::set_memory_budget(dev, 1);
  log.set_level(level);
  remat::set_memory_budget(dev, std::nullopt);
  ASSERT_EQ(remat::stats(dev).evictable_bytes, 0);
  ASSERT_GE(remat::stats(dev).evictions - evictions, 2) << "y and z were not evicted";
  testing::inject_sticky_fault(dev.index, "mul");  // the replay of y's op faults
  const std::string msg = testing::error_message<DeviceError>([&] { (void)add(y, z); });
  EXPECT_NE(msg.find("is lost"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in op mul"), std::string::npos) << msg;
  clear_device_lost(dev);
  EXPECT_TRUE(testing::allclose(add(y, z), std::vector<double>(1024, 10.0)));
}

}  // namespace
}  // namespace dtr
