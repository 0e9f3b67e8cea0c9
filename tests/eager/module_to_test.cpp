// nn::Module::to(Device): parameters, buffers and grads move to the test's
// second device (tests/second_device.h) in place, and training there gives
// bitwise what it gives on the CPU.
#include <gtest/gtest.h>

#include "second_device.h"
#include "testing.h"

namespace dtr {
namespace {

using testing::bitwise_equal;
using testing::second_device;

nn::Sequential make_mlp() {
  manual_seed(7);
  return nn::Sequential(nn::Linear(6, 16), nn::ReLU(), nn::Linear(16, 3));
}

// One SGD step (momentum, so the optimizer's state is on the device too) on
// fixed inputs made on the CPU; returns the loss.
double sgd_step(nn::Module& m, nn::UnaryModule& fwd, Device device) {
  manual_seed(11);
  const Tensor x = randn({5, 6}).to(device), target = randn({5, 3}).to(device);
  optim::SGD opt(m.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  opt.zero_grad();
  const Tensor loss = mse_loss(fwd.forward(x), target);
  loss.backward();
  opt.step();
  EXPECT_EQ(loss.device(), device);
  return loss.item<double>();
}

TEST(ModuleTo, SequentialTrainsOneStepBitwiseAsOnTheCpu) {
  auto cpu = make_mlp();
  auto dev = make_mlp();
  dev->to(second_device());
  for (const Tensor& p : dev->parameters()) EXPECT_EQ(p.device(), second_device());
  const double cpu_loss = sgd_step(*cpu, *cpu, Device(kCPU));
  const double dev_loss = sgd_step(*dev, *dev, second_device());
  EXPECT_EQ(std::memcmp(&cpu_loss, &dev_loss, sizeof(double)), 0) << cpu_loss << " vs " << dev_loss;
  const auto a = cpu->named_parameters(), b = dev->named_parameters();
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(b[i].second.device(), second_device()) << b[i].first;
    EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second.cpu())) << a[i].first;
    // Grads of moved parameters are on the device, and equal the CPU's.
    ASSERT_TRUE(b[i].second.grad().defined()) << b[i].first;
    EXPECT_EQ(b[i].second.grad().device(), second_device()) << b[i].first;
    EXPECT_TRUE(bitwise_equal(a[i].second.grad(), b[i].second.grad().cpu())) << a[i].first;
  }
}

TEST(ModuleTo, HandlesTakenBeforeTheMoveSeeIt) {
  auto m = make_mlp();
  auto linear = std::dynamic_pointer_cast<nn::LinearImpl>((*m)[0]);
  ASSERT_NE(linear, nullptr);
  const std::vector<Tensor> before = m->parameters();
  const std::vector<double> weight = linear->weight.to_vector<double>();
  m->to(second_device());
  ASSERT_EQ(before.size(), 4u);
  for (const Tensor& p : before) {
    EXPECT_EQ(p.device(), second_device());
    EXPECT_TRUE(p.is_leaf());
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_contiguous());
  }
  // The member, the handle from parameters() and the registry entry are one tensor.
  EXPECT_EQ(linear->weight.impl(), before[0].impl());
  EXPECT_EQ(linear->weight.device(), second_device());
  EXPECT_EQ(linear->weight.shape(), (Shape{16, 6}));
  EXPECT_EQ(linear->weight.to_vector<double>(), weight);
  // An optimizer built from the old handles trains the moved parameters.
  manual_seed(3);
  const Tensor x = randn({2, 6}).to(second_device());
  optim::SGD opt(before, optim::SGDOptions(0.5));
  m->forward(x).sum().backward();
  opt.step();
  EXPECT_EQ(before[0].grad().device(), second_device());
  EXPECT_NE(linear->weight.to_vector<double>(), weight);
}

TEST(ModuleTo, BatchNormBuffersMoveAndUpdateAsOnTheCpu) {
  manual_seed(5);
  auto cpu = nn::BatchNorm2d(3);
  manual_seed(5);
  auto dev = nn::BatchNorm2d(3);
  dev->to(second_device());
  const auto buffers = dev->named_buffers();
  ASSERT_EQ(buffers.size(), 3u);
  for (const auto& [n, b] : buffers) EXPECT_EQ(b.device(), second_device()) << n;
  EXPECT_EQ(dev->running_mean.device(), second_device());
  EXPECT_EQ(dev->running_var.device(), second_device());
  manual_seed(9);
  const Tensor x = randn({4, 3, 5, 5}) * 2.0 + 1.0;
  const Tensor y_cpu = cpu->forward(x);
  const Tensor y_dev = dev->forward(x.to(second_device()));
  EXPECT_EQ(y_dev.device(), second_device());
  EXPECT_TRUE(bitwise_equal(y_cpu, y_dev.cpu()));
  EXPECT_TRUE(bitwise_equal(cpu->running_mean, dev->running_mean.cpu()));
  EXPECT_TRUE(bitwise_equal(cpu->running_var, dev->running_var.cpu()));
  EXPECT_TRUE(bitwise_equal(cpu->num_batches_tracked, dev->num_batches_tracked.cpu()));
  // And back on the CPU, the buffers keep their values.
  dev->to(Device(kCPU));
  EXPECT_TRUE(dev->running_var.device().is_cpu());
  EXPECT_TRUE(bitwise_equal(cpu->running_var, dev->running_var));
}

TEST(ModuleTo, GradsMoveWithTheirParameters) {
  auto m = make_mlp();
  manual_seed(2);
  m->forward(randn({3, 6})).sum().backward();
  std::vector<std::vector<double>> grads;
  for (const Tensor& p : m->parameters()) grads.push_back(p.grad().to_vector<double>());
  m->to(second_device());
  const std::vector<Tensor> params = m->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined());
    EXPECT_EQ(params[i].grad().device(), second_device());
    EXPECT_EQ(params[i].grad().to_vector<double>(), grads[i]);
  }
}

TEST(ModuleTo, MovingWhereItIsIsANoOpAndBackComesHome) {
  auto m = make_mlp();
  const std::vector<Tensor> params = m->parameters();
  std::vector<const Storage*> storages;
  for (const Tensor& p : params) storages.push_back(p.storage().get());
  m->to(Device(kCPU));
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].storage().get(), storages[i]);
  m->to(second_device());
  std::vector<const Storage*> moved;
  for (const Tensor& p : params) moved.push_back(p.storage().get());
  m->to(second_device());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].storage().get(), moved[i]);
  // And back: the same values on the CPU.
  auto ref = make_mlp();
  m->to(Device(kCPU));
  const std::vector<Tensor> expected = ref->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].device().is_cpu());
    EXPECT_TRUE(bitwise_equal(params[i], expected[i]));
  }
}

TEST(ModuleTo, TiedParameterMovesOnceAndStaysShared) {
  manual_seed(1);
  auto a = nn::Linear(4, 4);
  nn::Sequential m;
  m->push_back(a);
  m->push_back(a);  // the same layer twice: its weight is registered under two names
  ASSERT_EQ(m->named_parameters().size(), 2u);  // listed once, as PyTorch's remove_duplicate
  ASSERT_EQ(m->named_parameters(true, false).size(), 4u);
  m->to(second_device());
  const auto named = m->named_parameters(true, false);
  EXPECT_EQ(named[0].second.impl(), named[2].second.impl());
  EXPECT_EQ(a->weight.device(), second_device());
}

TEST(ModuleTo, AnAbsentDeviceThrowsDeviceErrorAndLeavesTheModuleAsItWas) {
  second_device();  // registered, with kSecondDeviceCount devices
  auto m = make_mlp();
  const std::vector<Tensor> params = m->parameters();
  std::vector<const Storage*> storages;
  for (const Tensor& p : params) storages.push_back(p.storage().get());
  EXPECT_THROW(m->to(Device(kPrivateUse1, testing::kSecondDeviceCount + 3)), DeviceError);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].device().is_cpu());
    EXPECT_EQ(params[i].storage().get(), storages[i]);
  }
}

TEST(ModuleTo, TheOldBytesAreFreedOnTheCpu) {
  auto m = make_mlp();
  std::vector<std::weak_ptr<Storage>> old;
  for (const Tensor& p : m->parameters()) old.push_back(p.storage());
  m->to(second_device());
  for (const auto& w : old) EXPECT_TRUE(w.expired());
}

}  // namespace
}  // namespace dtr
