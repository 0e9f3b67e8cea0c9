// The collective rows on a device other than cuda:0, without a GPU: a world
// of one on the test device's second index (tests/second_device.h), as the
// nccl group of rank 1 would run on cuda:1. The kernel must hand the group
// the operands' device, and the out-of-place broadcast must copy through the
// backend (device memory is not host memory).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "dtr/dtr.h"
#include "eager/distributed/distributed.h"
#include "second_device.h"
#include "testing.h"

namespace dtr::distributed {
namespace {

/// A world of one process on `device`: every collective is the identity,
/// done at once. Records the devices its calls claimed.
class LoopbackGroup final : public ProcessGroup {
 public:
  explicit LoopbackGroup(Device device) : ProcessGroup(0, {0}, 30.0), device_(device) {}
  std::string_view backend_name() const override { return "loopback"; }
  Device device() const override { return device_; }
  std::vector<Device> calls;

 protected:
  std::shared_ptr<Work> start(const CollectiveCall& call, int64_t) override {
    calls.push_back(call.device);
    if (call.in.data != call.out.data)
      copy_bytes(call.device, call.out.data, call.device, call.in.data,
                 size_t(call.out.numel()) * size_t(itemsize(call.out.dtype)));
    struct Done final : Work {
      bool is_completed() override { return true; }
      void wait() override {}
    };
    return std::make_shared<Done>();
  }

 private:
  Device device_;
};

struct Adopted {
  std::shared_ptr<LoopbackGroup> g;
  explicit Adopted(Device d) : g(std::make_shared<LoopbackGroup>(d)) { adopt_group(g); }
  ~Adopted() { forget_group(g); }
};

TEST(CollectivesOnADevice, EveryCollectiveClaimsItsOperandsDevice) {
  const Device dev = testing::second_device(1);
  Adopted a(dev);
  Tensor t = from_vector<float>({1, 2, 3, 4}, {4}, TensorOptions().device(dev));
  all_reduce(t, ReduceOp::kSum, a.g);
  broadcast(t, 0, a.g);
  Tensor gathered = empty({4}, TensorOptions().device(dev));
  all_gather_into_tensor(gathered, t, a.g);
  Tensor out = functional::all_reduce(t, ReduceOp::kSum, a.g);
  ASSERT_EQ(a.g->calls.size(), 4u);
  for (const Device& d : a.g->calls) EXPECT_EQ(d, dev) << "a collective claimed " << d.str();
  EXPECT_TRUE(testing::allclose(t, {1, 2, 3, 4}));
  EXPECT_TRUE(testing::allclose(gathered, {1, 2, 3, 4}));
  EXPECT_TRUE(testing::allclose(out, {1, 2, 3, 4}));
}

TEST(CollectivesOnADevice, OutOfPlaceBroadcastCopiesThroughTheBackend) {
  const Device dev = testing::second_device(1);
  Adopted a(dev);
  const Tensor x = from_vector<float>({5, 6, 7}, {3}, TensorOptions().device(dev));
  const int64_t device_copies = testing::second_device_counters().device.load();
  const Tensor y = functional::broadcast(x, 0, a.g);
  EXPECT_EQ(testing::second_device_counters().device.load() - device_copies, 1)
      << "the root's input went to the output without the device's copy";
  EXPECT_EQ(y.device(), dev);
  EXPECT_TRUE(testing::allclose(y, {5, 6, 7}));
  ASSERT_EQ(a.g->calls.size(), 1u);
  EXPECT_EQ(a.g->calls[0], dev);
}

}  // namespace
}  // namespace dtr::distributed
