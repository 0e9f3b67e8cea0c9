// End-to-end checks of the op path: factory → dispatch → lineage → autograd.
#include "dtr/dtr.h"
#include "eager/lineage_record.h"
#include "tests/testing.h"

namespace dtr {
namespace {

TEST(Creation, FullZerosOnesArange) {
  EXPECT_TRUE(testing::allclose(full({2, 2}, 3.5), {3.5, 3.5, 3.5, 3.5}));
  EXPECT_TRUE(testing::allclose(zeros({3}), {0, 0, 0}));
  EXPECT_TRUE(testing::allclose(ones({2}, kFloat64), {1, 1}));
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(testing::allclose(arange(1.0, 2.0, 0.25, kFloat32), {1.0, 1.25, 1.5, 1.75}));
}

TEST(Creation, BadInputThrowsTypedErrors) {
  EXPECT_THROW(arange(0, 5, 0), ValueError);
  EXPECT_THROW(arange(5, 0, 1), ValueError);
  EXPECT_THROW(randint(3, 3, {2}), ValueError);
  EXPECT_THROW(randn({2}, kInt64), TypeError);
  EXPECT_THROW(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), ValueError);
  EXPECT_THROW(zeros({2, -1}), ValueError);
}

TEST(Creation, RandomIsReproducibleFromSeed) {
  manual_seed(7);
  Tensor a = randn({64});
  Tensor b = rand({64});
  manual_seed(7);
  Tensor c = randn({64});
  Tensor d = rand({64});
  EXPECT_TRUE(testing::bitwise_equal(a, c));
  EXPECT_TRUE(testing::bitwise_equal(b, d));
  EXPECT_FALSE(testing::bitwise_equal(a, randn({64})));
  for (double u : b.to_vector<double>()) {
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  const auto r = randint(-2, 3, {200}).to_vector<int64_t>();
  for (int64_t v : r) {
    EXPECT_GE(v, -2);
    EXPECT_LT(v, 3);
  }
}

TEST(Creation, FromVectorAndFromBlob) {
  Tensor t = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(t.item<double>(), ValueError);
  EXPECT_EQ(from_vector(std::vector<float>{2.5f}).item<float>(), 2.5f);
  std::vector<float> host{1, 2, 3, 4};
  Tensor b = from_blob(host.data(), {2, 2}, kFloat32);
  host[3] = 9;  // borrowed, not copied
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 9}));
  EXPECT_EQ(remat::stats().resident_bytes, remat::stats().resident_bytes);
  Tensor bf = from_vector(std::vector<float>{1.0f, 0.1f}, {2}, kBFloat16);
  EXPECT_EQ(bf.dtype(), kBFloat16);
  EXPECT_FLOAT_EQ(bf.to_vector<float>()[1], 0.10009765625f);
}

TEST(Lineage, EveryOpRecordsANode) {
  manual_seed(3);
  Tensor r = randn({4});
  const OpRecord* rec = lineage_of(r);
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->op->name, "randn");
  EXPECT_EQ(rec->rng.seed, 3u);
  Tensor c = r.clone();
  const OpRecord* rc = lineage_of(c);
  ASSERT_NE(rc, nullptr);
  EXPECT_EQ(rc->op->name, "clone");
  const remat::Node* producer = remat::producer(*c.storage());
  ASSERT_NE(producer, nullptr);
  ASSERT_EQ(producer->inputs.size(), 1u);
  EXPECT_EQ(producer->inputs[0], r.storage());
  {
    AutocastGuard ac(kBFloat16);
    Tensor d = r.clone();
    // AutocastGuard(dtype) turns autocast on for every device type.
    for (DeviceType t : {kCPU, kCUDA, kPrivateUse1}) {
      EXPECT_TRUE(lineage_of(d)->state.autocast[t].enabled);
      EXPECT_EQ(lineage_of(d)->state.autocast[t].dtype, kBFloat16);
    }
  }
  {
    NoGradGuard ng;
    EXPECT_FALSE(lineage_of(r.clone())->state.grad_mode);
  }
  EXPECT_EQ(lineage_of(from_vector(std::vector<float>{1})), nullptr);
}

TEST(Autograd, CloneAndCastBackward) {
  Tensor x = testing::leaf({3});
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return in[0].clone(); }, {x}));
  Tensor y = testing::leaf({2, 2}, 5);
  Tensor z = y.to(kFloat32);
  EXPECT_EQ(z.grad_fn_name(), "ToDtypeBackward");
  z.backward(ones({2, 2}));
  ASSERT_TRUE(y.grad().defined());
  EXPECT_EQ(y.grad().dtype(), kFloat64);
  EXPECT_TRUE(testing::allclose(y.grad(), {1, 1, 1, 1}));
}

TEST(Autograd, LeafInPlaceIsRejected) {
  Tensor x = testing::leaf({3});
  EXPECT_THROW(x.fill_(1), ValueError);
  {
    NoGradGuard ng;
    x.fill_(2);
  }
  EXPECT_TRUE(testing::allclose(x, {2, 2, 2}));
}

}  // namespace
}  // namespace dtr

namespace dtr {
namespace {

// PyTorch 1.13: a root gradient of another dtype is cast to the output's
// (an int64 one of a float32 output gives w.grad = [2, 2] in float32); another
// shape is an error; `x.grad = g` needs the same dtype, device and shape.
TEST(Autograd, BackwardGradientIsCheckedAndCast) {
  Tensor x = ones({2}).requires_grad_();
  (x * 2.0).backward(from_vector<int64_t>({1, 3}));
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_TRUE(dtr::testing::allclose(x.grad(), {2, 6}));
  x.set_grad(Tensor());
  (x * 2.0).backward(from_vector<double>({0.25, 0.5}));
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_TRUE(dtr::testing::allclose(x.grad(), {0.5, 1}));
  EXPECT_THROW((x * 2.0).backward(ones({3})), ValueError);
  EXPECT_THROW((x * 2.0).backward(ones({1, 2})), ValueError);
  EXPECT_THROW(x.set_grad(ones({2}, kInt64)), TypeError);
  EXPECT_THROW(x.set_grad(ones({2}, kFloat64)), TypeError);
  EXPECT_THROW(x.set_grad(ones({3})), ValueError);
  EXPECT_TRUE(dtr::testing::allclose(x.grad(), {0.5, 1}));  // unchanged by the refused ones
}

}  // namespace
}  // namespace dtr
