// Binary elementwise ops: broadcasting values (from PyTorch 1.13), type
// promotion, scalar forms, where, in-place behaviour through views, typed
// errors and gradient checks.
#include <cmath>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using testing::allclose;
using testing::gradcheck;

template <typename E, typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception mentioning '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Tensor f64(const std::vector<double>& v, IntList shape = {}) { return from_vector(v, shape); }
Tensor i64(const std::vector<int64_t>& v, IntList shape = {}) { return from_vector(v, shape); }

// A (2, 3), B (3), C (2, 1): every pair broadcasts to (2, 3).
Tensor A() { return f64({1, 2, 3, 4, 5, 6}, {2, 3}); }
Tensor B() { return f64({0.5, -1, 2}); }
Tensor C() { return f64({2, 3}, {2, 1}); }

TEST(Binary, BroadcastingValuesMatchPyTorch) {
  EXPECT_EQ(add(A(), B()).shape(), (Shape{2, 3}));
  EXPECT_TRUE(allclose(add(A(), B()), {1.5, 1.0, 5.0, 4.5, 4.0, 8.0}, 0, 0));
  EXPECT_TRUE(allclose(A() + B(), {1.5, 1.0, 5.0, 4.5, 4.0, 8.0}, 0, 0));
  EXPECT_TRUE(allclose(add(A(), C(), 2.5), {6.0, 7.0, 8.0, 11.5, 12.5, 13.5}, 0, 0));
  EXPECT_TRUE(allclose(sub(A(), B()), {0.5, 3.0, 1.0, 3.5, 6.0, 4.0}, 0, 0));
  EXPECT_TRUE(allclose(sub(B(), C(), 0.5), {-0.5, -2.0, 1.0, -1.0, -2.5, 0.5}, 0, 0));
  EXPECT_TRUE(allclose(mul(A(), C()), {2.0, 4.0, 6.0, 12.0, 15.0, 18.0}, 0, 0));
  EXPECT_TRUE(allclose(div(A(), B()), {2.0, -2.0, 1.5, 8.0, -5.0, 3.0}, 0, 0));
  EXPECT_TRUE(allclose(pow(A(), B()), {1.0, 0.5, 9.0, 2.0, 0.2, 36.0}, 0, 1e-15));
  EXPECT_TRUE(allclose(maximum(A(), C()), {2.0, 2.0, 3.0, 4.0, 5.0, 6.0}, 0, 0));
  EXPECT_TRUE(allclose(minimum(A(), C()), {1.0, 2.0, 2.0, 3.0, 3.0, 3.0}, 0, 0));
  // (2, 1) with (3): an outer product shape.
  EXPECT_EQ(mul(C(), B()).shape(), (Shape{2, 3}));
  EXPECT_TRUE(allclose(mul(C(), B()), {1.0, -2.0, 4.0, 1.5, -3.0, 6.0}, 0, 0));
  // 0-d tensors broadcast against anything.
  EXPECT_TRUE(allclose(mul(A(), full({}, 2.0, kFloat64)), {2, 4, 6, 8, 10, 12}, 0, 0));
}

TEST(Binary, ScalarFormsMatchPyTorch) {
  EXPECT_TRUE(allclose(add(B(), 1), {1.5, 0.0, 3.0}, 0, 0));
  EXPECT_TRUE(allclose(sub(B(), 1), {-0.5, -2.0, 1.0}, 0, 0));
  EXPECT_TRUE(allclose(mul(B(), 3), {1.5, -3.0, 6.0}, 0, 0));
  EXPECT_TRUE(allclose(div(B(), 4), {0.125, -0.25, 0.5}, 0, 0));
  EXPECT_TRUE(allclose(2 - B(), {1.5, 3.0, 0.0}, 0, 0));
  EXPECT_TRUE(allclose(2 / B(), {4.0, -2.0, 1.0}, 0, 0));
  EXPECT_TRUE(allclose(B() * 2 + 1, {2.0, -1.0, 5.0}, 0, 0));
  EXPECT_TRUE(allclose(pow(A(), 2), {1, 4, 9, 16, 25, 36}, 0, 0));
  EXPECT_TRUE(allclose(A().pow(0.5), {1.0, 1.4142135623730951, 1.7320508075688772, 2.0,
                                      2.23606797749979, 2.449489742783178}, 0, 1e-15));
  EXPECT_TRUE(allclose(pow(A(), 1.5), {1.0, 2.8284271247461903, 5.196152422706632, 8.0,
                                       11.180339887498949, 14.696938456699069}, 0, 1e-15));
  EXPECT_TRUE(allclose(pow(A(), -1), {1.0, 0.5, 0.3333333333333333, 0.25, 0.2,
                                      0.16666666666666666}, 0, 1e-15));
}

TEST(Binary, TypePromotionFollowsResultType) {
  const Tensor i = i64({7, -7, 9});
  // Integer true division is float32.
  EXPECT_EQ(div(i, 2).dtype(), kFloat32);
  EXPECT_TRUE(allclose(div(i, 2), {3.5, -3.5, 4.5}, 0, 0));
  EXPECT_EQ(div(i, i64({2, 2, 4})).dtype(), kFloat32);
  EXPECT_TRUE(allclose(div(i, i64({2, 2, 4})), {3.5, -3.5, 2.25}, 0, 0));
  // Integer tensor with an integer scalar stays int64; with a float scalar, float32.
  EXPECT_EQ(add(i, 2).dtype(), kInt64);
  EXPECT_EQ(add(i, 2).to_vector<int64_t>(), (std::vector<int64_t>{9, -5, 11}));
  EXPECT_EQ(add(i, 2.5).dtype(), kFloat32);
  EXPECT_EQ(mul(i, 2.0).dtype(), kFloat32);
  EXPECT_EQ(pow(i, 2).dtype(), kInt64);
  EXPECT_EQ(pow(i, 2).to_vector<int64_t>(), (std::vector<int64_t>{49, 49, 81}));
  EXPECT_EQ(pow(i64({2, 3, -2}), i64({10, 3, -1})).to_vector<int64_t>(),
            (std::vector<int64_t>{1024, 27, 0}));
  // float32 with float64 is float64; a 0-d float64 tensor does not widen a float32 one.
  const Tensor x32 = full({3}, 1.5);
  EXPECT_EQ(mul(x32, B()).dtype(), kFloat64);
  EXPECT_EQ(mul(x32, full({}, 2.0, kFloat64)).dtype(), kFloat32);
  // int32 with a 0-d int64 tensor stays int32; with a 0-d float tensor it is that float type.
  const Tensor i32 = from_vector(std::vector<int32_t>{1, 2});
  EXPECT_EQ(add(i32, full({}, 5, kInt64)).dtype(), kInt32);
  EXPECT_EQ(add(i32, full({}, 5, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(add(i32, i64({1, 1})).dtype(), kInt64);
  // bool: add is logical or, mul logical and; bool with an int scalar is int64.
  const Tensor t = from_vector(std::vector<bool>{true, false, true});
  const Tensor f = from_vector(std::vector<bool>{true, false, false});
  EXPECT_EQ(add(t, f).dtype(), kBool);
  EXPECT_EQ(add(t, f).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(mul(t, f).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(add(t, 1).dtype(), kInt64);
  EXPECT_EQ(add(t, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2}));
  // uint8 wraps like PyTorch: [1, 2] - 3 = [254, 255].
  const Tensor u = from_vector(std::vector<uint8_t>{1, 2});
  EXPECT_EQ(sub(u, 3).dtype(), kUInt8);
  EXPECT_EQ(sub(u, 3).to_vector<int64_t>(), (std::vector<int64_t>{254, 255}));
  // Mixed float16 + float32 is float32; float16 + float16 rounds to float16.
  const Tensor h1 = from_vector(std::vector<float>{1.1f, 2.2f, 3.3f}).to(kFloat16);
  const Tensor h2 = from_vector(std::vector<float>{0.7f, 0.1f, -5.0f}).to(kFloat16);
  EXPECT_EQ(add(h1, h2).dtype(), kFloat16);
  EXPECT_TRUE(allclose(add(h1, h2), {1.7998046875, 2.298828125, -1.69921875}, 0, 0));
  EXPECT_TRUE(allclose(mul(h1, h2), {0.77001953125, 0.2198486328125, -16.5}, 0, 0));
  EXPECT_EQ(add(h1, h2.to(kFloat32)).dtype(), kFloat32);
  EXPECT_TRUE(allclose(add(h1, h2.to(kFloat32)), {1.7998046875, 2.2991943359375, -1.69921875}, 0, 0));
}

TEST(Binary, ComparisonsGiveBool) {
  const Tensor a = f64({1, 2, 3});
  const Tensor b = f64({3, 2, 1});
  EXPECT_EQ(eq(a, b).dtype(), kBool);
  EXPECT_EQ(eq(a, b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(ne(a, b).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(lt(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(le(a, b).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(gt(a, b).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(ge(a, b).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(gt(a, 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(le(a, 2).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  // An integer tensor against a float scalar compares in float: 1 == 1.5 is false.
  EXPECT_EQ(eq(i64({1, 2}), 1.5).to_vector<bool>(), (std::vector<bool>{false, false}));
  EXPECT_EQ(lt(i64({1, 2}), f64({1.5, 1.5})).to_vector<bool>(), (std::vector<bool>{true, false}));
  // Broadcasting (2, 1) against (3).
  EXPECT_EQ(ge(C(), B()).shape(), (Shape{2, 3}));
  EXPECT_EQ(ge(C(), B()).to_vector<bool>(), (std::vector<bool>{true, true, true, true, true, true}));
  // Not differentiable: a comparison of a tensor requiring grad does not require grad.
  Tensor x = testing::leaf({3});
  EXPECT_FALSE(gt(x, 0.0).requires_grad());
}

TEST(Binary, NanPropagatesThroughMaximumAndMinimum) {
  const double nan = std::nan("");
  const auto mx = maximum(f64({1, nan}), f64({2, 0})).to_vector<double>();
  EXPECT_EQ(mx[0], 2);
  EXPECT_TRUE(std::isnan(mx[1]));
  const auto mn = minimum(f64({nan, 1}), f64({0, 2})).to_vector<double>();
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], 1);
}

TEST(Binary, WhereBroadcastsAndPromotes) {
  const Tensor cond = gt(A(), 2.5);
  EXPECT_TRUE(allclose(where(cond, A(), B()), {0.5, -1.0, 3.0, 4.0, 5.0, 6.0}, 0, 0));
  const Tensor bcond = from_vector(std::vector<bool>{true, false, true});
  const Tensor r = where(bcond, i64({1, 2, 3}), full({}, 0.5, kFloat32));
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_TRUE(allclose(r, {1.0, 0.5, 3.0}, 0, 0));
  expect_error<TypeError>([] { where(i64({1, 0}), f64({1, 2}), f64({3, 4})); }, "where");
  expect_error<ValueError>([] { where(from_vector(std::vector<bool>{true, false}), f64({1, 2, 3}), f64({1})); },
                           "where");
}

TEST(Binary, BadInputThrowsTypedErrorsNamingTheOp) {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = f64({1, 2, 3, 4});
  expect_error<ValueError>([&] { add(a, b); }, "add");
  expect_error<ValueError>([&] { mul(a, b); }, "mul");
  expect_error<ValueError>([&] { maximum(a, b); }, "maximum");
  expect_error<ValueError>([&] { eq(a, b); }, "eq");
  const Tensor t = from_vector(std::vector<bool>{true});
  expect_error<TypeError>([&] { sub(t, t); }, "sub");
  expect_error<TypeError>([&] { add(i64({1}), i64({2}), 0.5); }, "alpha");
  expect_error<ValueError>([&] { pow(i64({2}), -1); }, "pow");
  expect_error<ValueError>([&] { add(a, Tensor()); }, "add");
}

TEST(Binary, StridedAndLargeInputsMatchContiguous) {
  manual_seed(11);
  const Tensor x = randn({257, 300});
  const Tensor y = randn({300, 257});
  const Tensor yt = y.t();  // strided (257, 300)
  const Tensor yc = yt.contiguous();
  EXPECT_TRUE(testing::bitwise_equal(add(x, yt), add(x, yc)));
  EXPECT_TRUE(testing::bitwise_equal(mul(yt, x), mul(yc, x)));
  EXPECT_TRUE(testing::bitwise_equal(div(x, yt), div(x, yc)));
  EXPECT_TRUE(testing::bitwise_equal(maximum(x, yt), maximum(x, yc)));
  EXPECT_TRUE(testing::bitwise_equal(gt(x, yt), gt(x, yc)));
  // Row broadcast (a bias add) against a hand loop.
  const Tensor bias = randn({300});
  const auto s = add(x, bias).to_vector<float>();
  const auto xv = x.to_vector<float>(), bv = bias.to_vector<float>();
  for (size_t k : {size_t(0), size_t(299), size_t(300), size_t(40000), xv.size() - 1})
    EXPECT_EQ(s[k], xv[k] + bv[k % 300]);
  // An input repeated along the inner dim ((N, C) * (N, 1)) and a 0-d tensor
  // give the same bits as the materialized operands and the scalar form.
  const Tensor col = randn({257, 1});
  EXPECT_TRUE(testing::bitwise_equal(mul(x, col), mul(x, col.expand({257, 300}).contiguous())));
  EXPECT_TRUE(testing::bitwise_equal(sub(col, x), sub(col.expand({257, 300}).contiguous(), x)));
  EXPECT_TRUE(testing::bitwise_equal(mul(x, full({}, 0.5)), mul(x, 0.5)));
  // Scalar fast path.
  const auto m = mul(x, 0.5).to_vector<float>();
  for (size_t k : {size_t(0), size_t(7777), xv.size() - 1}) EXPECT_EQ(m[k], xv[k] * 0.5f);
}

TEST(Binary, InPlaceWritesThroughViews) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  x.slice(1, 1, 3).add_(1);  // columns 1 and 2
  EXPECT_TRUE(allclose(x, {1, 3, 4, 4, 6, 7}, 0, 0));
  x.select(0, 1).mul_(f64({2, 0, 1}));
  EXPECT_TRUE(allclose(x, {1, 3, 4, 8, 0, 7}, 0, 0));
  x.t().sub_(f64({1, 1}), 2);  // (3, 2) view; other (2) broadcasts over rows
  EXPECT_TRUE(allclose(x, {-1, 1, 2, 6, -2, 5}, 0, 0));
  x.div_(2);
  EXPECT_TRUE(allclose(x, {-0.5, 0.5, 1, 3, -1, 2.5}, 0, 0));
  x.sub_(0.5);
  EXPECT_TRUE(allclose(x, {-1, 0, 0.5, 2.5, -1.5, 2}, 0, 0));
  x.mul_(2);
  EXPECT_TRUE(allclose(x, {-2, 0, 1, 5, -3, 4}, 0, 0));
  x.div_(f64({2, 4}, {2, 1}));
  EXPECT_TRUE(allclose(x, {-1, 0, 0.5, 1.25, -0.75, 1}, 0, 0));
  Tensor& r = x.add_(f64({1, 1, 1}), 0.5);
  EXPECT_EQ(&r, &x);
  EXPECT_TRUE(allclose(x, {-0.5, 0.5, 1, 1.75, -0.25, 1.5}, 0, 0));
  // Integer self with integer operands; a float32 self takes a float64 operand.
  Tensor i = i64({1, 2});
  i.add_(i64({10, 20}));
  i.mul_(3);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{33, 66}));
  Tensor f = full({2}, 1.0);
  f.add_(f64({0.25, 0.5}));
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(allclose(f, {1.25, 1.5}, 0, 0));
}

TEST(Binary, InPlaceWithOverlappingOperand) {
  Tensor x = f64({1, 2, 3});
  x.add_(x);  // the same view: each element read before it is written
  EXPECT_TRUE(allclose(x, {2, 4, 6}, 0, 0));
  Tensor y = f64({1, 2, 3});
  y.slice(0, 1, 3).add_(y.slice(0, 0, 2));  // partial overlap reads the old values
  EXPECT_TRUE(allclose(y, {1, 3, 5}, 0, 0));
}

TEST(Binary, InPlaceErrors) {
  Tensor x = f64({1, 2, 3});
  expect_error<ValueError>([&] { x.add_(f64({1, 2, 3, 4, 5, 6}, {2, 3})); }, "add_");
  expect_error<ValueError>([&] { x.mul_(f64({1, 2})); }, "mul_");
  Tensor i = i64({1, 2, 3});
  expect_error<TypeError>([&] { i.add_(1.5); }, "add_");
  expect_error<TypeError>([&] { i.div_(2); }, "div_");
  expect_error<TypeError>([&] { i.mul_(f64({1, 2, 3})); }, "mul_");
  Tensor b = from_vector(std::vector<bool>{true});
  expect_error<TypeError>([&] { b.add_(1); }, "add_");
  Tensor e = f64({1.0}).expand({3});
  expect_error<ValueError>([&] { e.add_(1); }, "add_");
  Tensor leaf = testing::leaf({3});
  expect_error<ValueError>([&] { leaf.mul_(2); }, "mul_");
}

TEST(Binary, InPlaceBumpsVersionAndBreaksSavedTensors) {
  Tensor a = testing::leaf({3});
  Tensor h = mul(a, 2.0);
  Tensor z = mul(h, h);  // saves h
  h.add_(1);
  EXPECT_THROW(sum(z).backward(), Error);
  // Writing through a view of a saved tensor is caught too (same storage).
  Tensor h2 = mul(a, 2.0);
  Tensor z2 = mul(h2, h2);
  {
    NoGradGuard ng;
    h2.slice(0, 0, 1).mul_(5);
  }
  EXPECT_THROW(sum(z2).backward(), Error);
}

TEST(Binary, InPlaceGradientsFlowThroughEarlierOps) {
  // h = (a * 1) * b in place: dh/da = b, dh/db = a.
  Tensor a = testing::leaf({3}, 1);
  Tensor b = testing::leaf({3}, 2);
  Tensor h = mul(a, 1.0);
  h.mul_(b);
  sum(h).backward();
  EXPECT_TRUE(allclose(a.grad(), b.detach().to_vector<double>(), 0, 0));
  EXPECT_TRUE(allclose(b.grad(), a.detach().to_vector<double>(), 0, 0));
}

// ---- gradient checks (float64 finite differences) ----------------------------------------

TEST(BinaryGrad, TensorTensorWithBroadcasting) {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add", +[](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"add_alpha", +[](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); }},
      {"sub", +[](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"sub_alpha", +[](const Tensor& a, const Tensor& b) { return sub(a, b, -1.5); }},
      {"mul", +[](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", +[](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"maximum", +[](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", +[](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  for (const auto& [name, fn] : ops) {
    // (2, 3) with (3) and (2, 1) with (3): both operands broadcast.
    EXPECT_TRUE(gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); },
                          {testing::leaf({2, 3}, 3), testing::leaf({3}, 4)}))
        << name;
    EXPECT_TRUE(gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); },
                          {testing::leaf({2, 1}, 5), testing::leaf({3}, 6)}))
        << name;
  }
  // pow on a positive base (both gradients), broadcasting the exponent.
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return pow(add(abs(in[0]), 0.5), in[1]); },
      {testing::leaf({2, 3}, 7), testing::leaf({3}, 8)}));
  // Only one operand requires grad.
  Tensor c = f64({0.5, -2, 3});
  EXPECT_TRUE(gradcheck([c](const std::vector<Tensor>& in) { return div(c, in[0]); },
                        {testing::leaf({2, 3}, 9)}));
}

TEST(BinaryGrad, PowGradientsAtZeroFollowPyTorch) {
  // d/da a^b at b == 0 is 0; d/db a^b at a == 0, b >= 0 is 0 (no NaN from log 0).
  Tensor a = f64({0.0, 2.0});
  a.requires_grad_();
  Tensor b = f64({2.0, 0.0});
  b.requires_grad_();
  sum(pow(a, b)).backward();
  EXPECT_TRUE(allclose(a.grad(), {0.0, 0.0}, 0, 0));
  EXPECT_TRUE(allclose(b.grad(), {0.0, std::log(2.0)}, 0, 1e-15));
}

TEST(BinaryGrad, MaximumSplitsTiesEvenly) {
  Tensor a = f64({1, 2, 3});
  a.requires_grad_();
  Tensor b = f64({1, 5, 0});
  b.requires_grad_();
  sum(maximum(a, b)).backward();
  EXPECT_TRUE(allclose(a.grad(), {0.5, 0, 1}, 0, 0));
  EXPECT_TRUE(allclose(b.grad(), {0.5, 1, 0}, 0, 0));
}

TEST(BinaryGrad, WhereAndScalarForms) {
  const Tensor cond = from_vector(std::vector<bool>{true, false, true});
  EXPECT_TRUE(gradcheck([cond](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); },
                        {testing::leaf({2, 3}, 1), testing::leaf({3}, 2)}));
  using Fn = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add_scalar", +[](const Tensor& a) { return add(a, 1.5); }},
      {"sub_scalar", +[](const Tensor& a) { return sub(a, 1.5); }},
      {"rsub", +[](const Tensor& a) { return 2.0 - a; }},
      {"mul_scalar", +[](const Tensor& a) { return mul(a, -3.0); }},
      {"div_scalar", +[](const Tensor& a) { return div(a, 4.0); }},
      {"rdiv", +[](const Tensor& a) { return 2.0 / add(abs(a), 0.5); }},
      {"pow_2", +[](const Tensor& a) { return pow(a, 2); }},
      {"pow_3", +[](const Tensor& a) { return pow(a, 3); }},
      {"pow_1.5", +[](const Tensor& a) { return pow(add(abs(a), 0.5), 1.5); }},
      {"pow_-0.5", +[](const Tensor& a) { return pow(add(abs(a), 0.5), -0.5); }},
      {"pow_0", +[](const Tensor& a) { return mul(pow(a, 0), a); }},
  };
  for (const auto& [name, fn] : ops) {
    EXPECT_TRUE(gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0]); },
                          {testing::leaf({2, 3}, 3)}))
        << name;
  }
}

TEST(BinaryGrad, InPlaceFormsReuseTheOutOfPlaceRules) {
  using Fn = void (*)(Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add_", +[](Tensor& h, const Tensor& o) { h.add_(o, 0.5); }},
      {"sub_", +[](Tensor& h, const Tensor& o) { h.sub_(o); }},
      {"mul_", +[](Tensor& h, const Tensor& o) { h.mul_(o); }},
      {"div_", +[](Tensor& h, const Tensor& o) { h.div_(add(abs(o), 0.5)); }},
      {"add_scalar_", +[](Tensor& h, const Tensor&) { h.add_(2); }},
      {"sub_scalar_", +[](Tensor& h, const Tensor&) { h.sub_(2); }},
      {"mul_scalar_", +[](Tensor& h, const Tensor&) { h.mul_(-1.5); }},
      {"div_scalar_", +[](Tensor& h, const Tensor&) { h.div_(3); }},
  };
  for (const auto& [name, fn] : ops) {
    EXPECT_TRUE(gradcheck(
        [fn = fn](const std::vector<Tensor>& in) {
          Tensor h = mul(in[0], 1.0);  // a non-leaf (2, 3) to write into
          fn(h, in[1]);                // other (3) broadcasts
          return h;
        },
        {testing::leaf({2, 3}, 10), testing::leaf({3}, 11)}))
        << name;
  }
}

// Tensor-scalar rows by name with a scalar the integer compute type cannot
// hold (found by the dispatch fuzzer: an undefined NaN-to-int64 conversion).
TEST(Binary, ScalarRowsRefuseAScalarTheirIntegerTypeCannotHold) {
  const Tensor x = from_vector<int64_t>({1, 2}, {2});
  for (const char* name : {"mul_scalar", "add_scalar", "lt_scalar"}) {
    EXPECT_THROW((void)dispatch1(op(name), {x}, Attrs{{"other", std::nan("")}, {"other_is_float", false}}), ValueError)
        << name;
    EXPECT_THROW((void)dispatch1(op(name), {x}, Attrs{{"other", 1e300}, {"other_is_float", false}}), ValueError) << name;
  }
  EXPECT_EQ(dispatch1(op("mul_scalar"), {x}, Attrs{{"other", 3.0}, {"other_is_float", false}}).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 6}));
  EXPECT_EQ((x * std::nan("")).dtype(), kFloat32);  // the op function promotes, as PyTorch
}

}  // namespace
}  // namespace dtr
