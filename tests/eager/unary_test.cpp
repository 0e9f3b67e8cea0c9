// Unary elementwise ops: values (from PyTorch 1.13, float64 unless noted),
// dtypes, strided and in-place behaviour, typed errors and gradient checks.
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
Tensor f32(const std::vector<float>& v, IntList shape = {}) { return from_vector(v, shape); }

const std::vector<double> kX = {-2.0, -0.5, 0.25, 0.5, 2.0};
const std::vector<double> kPositive = {0.25, 0.5, 1.0, 2.0, 9.0};

TEST(Unary, ValuesMatchPyTorchFloat64) {
  const Tensor x = f64(kX), p = f64(kPositive);
  const double tight = 1e-15;
  EXPECT_TRUE(allclose(neg(x), {2.0, 0.5, -0.25, -0.5, -2.0}, 0, 0));
  EXPECT_TRUE(allclose(-x, {2.0, 0.5, -0.25, -0.5, -2.0}, 0, 0));
  EXPECT_TRUE(allclose(abs(x), {2.0, 0.5, 0.25, 0.5, 2.0}, 0, 0));
  EXPECT_TRUE(allclose(exp(x), {0.1353352832366127, 0.6065306597126334, 1.2840254166877414,
                                1.6487212707001282, 7.38905609893065}, 0, tight));
  EXPECT_TRUE(allclose(log(p), {-1.3862943611198906, -0.6931471805599453, 0.0, 0.6931471805599453,
                                2.1972245773362196}, 0, tight));
  EXPECT_TRUE(allclose(sqrt(p), {0.5, 0.7071067811865476, 1.0, 1.4142135623730951, 3.0}, 0, tight));
  EXPECT_TRUE(allclose(rsqrt(p), {2.0, 1.414213562373095, 1.0, 0.7071067811865475,
                                  0.3333333333333333}, 0, tight));
  EXPECT_TRUE(allclose(tanh(x), {-0.9640275800758169, -0.46211715726000974, 0.24491866240370913,
                                 0.46211715726000974, 0.9640275800758169}, 0, tight));
  EXPECT_TRUE(allclose(sigmoid(x), {0.11920292202211755, 0.3775406687981454, 0.5621765008857981,
                                    0.6224593312018546, 0.8807970779778823}, 0, tight));
  EXPECT_TRUE(allclose(relu(x), {0.0, 0.0, 0.25, 0.5, 2.0}, 0, 0));
  EXPECT_TRUE(allclose(reciprocal(x), {-0.5, -2.0, 4.0, 2.0, 0.5}, 0, 0));
  EXPECT_TRUE(allclose(gelu(x), {-0.04550026389635842, -0.15426876936299344, 0.14967658142073093,
                                 0.34573123063700656, 1.9544997361036416}, 1e-16, 1e-14));
  EXPECT_TRUE(allclose(gelu(x, "tanh"), {-0.04540230591222494, -0.15428599017485606,
                                         0.149675350701685, 0.34571400982514394,
                                         1.954597694087775}, 1e-16, 1e-14));
  EXPECT_TRUE(allclose(silu(x), {-0.2384058440442351, -0.1887703343990727, 0.14054412522144952,
                                 0.3112296656009273, 1.7615941559557646}, 0, tight));
  EXPECT_TRUE(allclose(clamp(x, -1, 0.4), {-1.0, -0.5, 0.25, 0.4, 0.4}, 0, 0));
  EXPECT_TRUE(allclose(clamp(x, 0.3, std::nullopt), {0.3, 0.3, 0.3, 0.5, 2.0}, 0, 0));
  EXPECT_TRUE(allclose(clamp(x, std::nullopt, 0.0), {-2.0, -0.5, 0.0, 0.0, 0.0}, 0, 0));
  // Methods forward to the free functions.
  EXPECT_TRUE(allclose(x.relu(), {0.0, 0.0, 0.25, 0.5, 2.0}, 0, 0));
  EXPECT_TRUE(allclose(p.sqrt(), {0.5, 0.7071067811865476, 1.0, 1.4142135623730951, 3.0}, 0, tight));
}

TEST(Unary, Float32ValuesMatchPyTorch) {
  const Tensor x = from_vector(std::vector<float>{-2.0f, -0.5f, 0.25f, 0.5f, 2.0f});
  EXPECT_EQ(exp(x).dtype(), kFloat32);
  // PyTorch's float32 results; one ulp of slack for the C library's expf/tanhf.
  const double ulp = 2e-7;
  EXPECT_TRUE(allclose(exp(x), {0.1353352814912796, 0.6065306663513184, 1.2840254306793213,
                                1.6487212181091309, 7.389056205749512}, 0, ulp));
  EXPECT_TRUE(allclose(tanh(x), {-0.9640275835990906, -0.46211716532707214, 0.24491865932941437,
                                 0.46211716532707214, 0.9640275835990906}, 0, ulp));
  EXPECT_TRUE(allclose(sigmoid(x), {0.11920291930437088, 0.3775406777858734, 0.562176525592804,
                                    0.622459352016449, 0.8807970285415649}, 0, ulp));
  // PyTorch's float32 gelu uses a SIMD erf approximation that is off by up to
  // ~4e-6 relative at x = -2 (the float64 value is -0.0455002639); std::erf
  // is closer, so the comparison allows that much.
  EXPECT_TRUE(allclose(gelu(x), {-0.045500099658966064, -0.1542687863111496, 0.14967656135559082,
                                 0.3457311987876892, 1.9544999599456787}, 0, 1e-5));
  EXPECT_TRUE(allclose(silu(x), {-0.23840583860874176, -0.1887703388929367, 0.140544131398201,
                                 0.3112296760082245, 1.7615940570831299}, 0, ulp));
}

// float32 exp/tanh/erf are vectorizable approximations (cpu/vec_math.h):
// check them against float64 on a dense grid, and at the special values.
TEST(Unary, Float32TranscendentalsAreAccurate) {
  std::vector<float> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(float(i) * 1e-4f);  // [-20, 20]
  for (int i = -1040; i <= 890; ++i) xs.push_back(float(i) * 0.1f);         // exp's range
  const Tensor x = from_vector(xs);
  const auto e = exp(x).to_vector<float>();
  const auto t = tanh(x).to_vector<float>();
  const auto s = sigmoid(x).to_vector<float>();
  const auto g = gelu(x).to_vector<float>();
  const auto gt = gelu(x, "tanh").to_vector<float>();
  double worst_exp = 0, worst_tanh = 0, worst_sigmoid = 0, worst_gelu = 0, worst_gelu_tanh = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double ex = std::exp(v);
    if (ex > 1.2e-38 && ex < 3.4e38) worst_exp = std::max(worst_exp, std::abs(e[i] - ex) / ex);
    const double th = std::tanh(v);
    if (th != 0) worst_tanh = std::max(worst_tanh, std::abs(t[i] - th) / std::abs(th));
    const double sg = 1 / (1 + std::exp(-v));
    if (sg > 1.2e-38) worst_sigmoid = std::max(worst_sigmoid, std::abs(s[i] - sg) / sg);
    const double ge = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    worst_gelu = std::max(worst_gelu, std::abs(g[i] - ge) / std::max(std::abs(v), 1e-3));
    const double inner = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
    const double get = 0.5 * v * (1 + std::tanh(inner));
    worst_gelu_tanh = std::max(worst_gelu_tanh, std::abs(gt[i] - get) / std::max(std::abs(v), 1e-3));
  }
  EXPECT_LT(worst_exp, 2.4e-7);        // 2 ulp
  EXPECT_LT(worst_tanh, 3e-7);
  EXPECT_LT(worst_sigmoid, 4e-7);
  // gelu errors relative to |x|: erf is within ~5e-7 absolute (as PyTorch's).
  EXPECT_LT(worst_gelu, 4e-7);
  EXPECT_LT(worst_gelu_tanh, 4e-7);
  const float inf = INFINITY, nan = NAN;
  const auto sp = exp(from_vector(std::vector<float>{inf, -inf, nan, 100.0f, -110.0f})).to_vector<float>();
  EXPECT_EQ(sp[0], inf);
  EXPECT_EQ(sp[1], 0.0f);
  EXPECT_TRUE(std::isnan(sp[2]));
  EXPECT_EQ(sp[3], inf);
  EXPECT_EQ(sp[4], 0.0f);
  const auto tp = tanh(from_vector(std::vector<float>{inf, -inf, nan, 1e-20f})).to_vector<float>();
  EXPECT_EQ(tp[0], 1.0f);
  EXPECT_EQ(tp[1], -1.0f);
  EXPECT_TRUE(std::isnan(tp[2]));
  EXPECT_EQ(tp[3], 1e-20f);
  const auto gp = gelu(from_vector(std::vector<float>{inf, -inf, 0.0f, -30.0f})).to_vector<float>();
  EXPECT_EQ(gp[0], inf);
  EXPECT_EQ(gp[2], 0.0f);
  EXPECT_EQ(gp[3], -0.0f);
  const auto sgp = sigmoid(from_vector(std::vector<float>{-inf, inf, -200.0f})).to_vector<float>();
  EXPECT_EQ(sgp[0], 0.0f);
  EXPECT_EQ(sgp[1], 1.0f);
  EXPECT_EQ(sgp[2], 0.0f);
}

TEST(Unary, HalfPrecisionComputesInFloat32AndRounds) {
  const Tensor h = f32({-1.5f, 0.5f, 1.0f, 3.0f}).to(kFloat16);
  const Tensor e = exp(h);
  EXPECT_EQ(e.dtype(), kFloat16);
  EXPECT_TRUE(allclose(e, {0.22314453125, 1.6484375, 2.71875, 20.078125}, 0, 0));
  const Tensor s = sigmoid(h.to(kBFloat16));
  EXPECT_EQ(s.dtype(), kBFloat16);
  EXPECT_TRUE(allclose(s, {0.1826171875, 0.62109375, 0.73046875, 0.953125}, 0, 0));
}

TEST(Unary, NanAndSignedZeroFollowPyTorch) {
  const double nan = std::nan("");
  const Tensor x = f64({nan, -0.0, -1.0});
  const auto r = relu(x).to_vector<double>();
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_TRUE(std::signbit(r[1]));  // torch.relu(-0.0) is -0.0
  EXPECT_EQ(r[2], 0.0);
  const auto c = clamp(x, 0, 1).to_vector<double>();
  EXPECT_TRUE(std::isnan(c[0]));
  EXPECT_EQ(c[2], 0.0);
  // min > max: every element is max (torch.clamp).
  EXPECT_TRUE(allclose(clamp(f64({0.0, 5.0}), 2, 1), {1.0, 1.0}, 0, 0));
}

TEST(Unary, DtypePromotionAndIntegerOps) {
  const Tensor i = from_vector(std::vector<int64_t>{1, -2, 3});
  EXPECT_EQ(exp(i).dtype(), kFloat32);
  EXPECT_TRUE(allclose(exp(i), {2.718281828459045, 0.1353352832366127, 20.085536923187668}, 0, 2e-7));
  EXPECT_EQ(sigmoid(i).dtype(), kFloat32);
  EXPECT_EQ(reciprocal(i).dtype(), kFloat32);
  EXPECT_TRUE(allclose(reciprocal(i), {1.0, -0.5, 1.0 / 3.0}, 0, 1e-7));
  EXPECT_EQ(neg(i).dtype(), kInt64);
  EXPECT_EQ(neg(i).to_vector<int64_t>(), (std::vector<int64_t>{-1, 2, -3}));
  EXPECT_EQ(abs(i).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(relu(i).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3}));
  const Tensor i32 = from_vector(std::vector<int32_t>{5, -5});
  EXPECT_EQ(abs(i32).dtype(), kInt32);
  EXPECT_EQ(abs(i32).to_vector<int32_t>(), (std::vector<int32_t>{5, 5}));
  // clamp promotes with its bounds, like torch.clamp.
  EXPECT_EQ(clamp(i, 0, 2).dtype(), kInt64);
  EXPECT_EQ(clamp(i, 0, 2).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(clamp(i, 0.5, std::nullopt).dtype(), kFloat32);
  EXPECT_TRUE(allclose(clamp(i, 0.5, std::nullopt), {1.0, 0.5, 3.0}, 0, 0));
  const Tensor b = from_vector(std::vector<bool>{true, false});
  EXPECT_EQ(exp(b).dtype(), kFloat32);
  EXPECT_TRUE(allclose(exp(b), {2.7182817459106445, 1.0}, 0, 1e-7));
}

TEST(Unary, BadInputThrowsTypedErrorsNamingTheOp) {
  const Tensor b = from_vector(std::vector<bool>{true, false});
  const Tensor i = from_vector(std::vector<int64_t>{1, 2});
  expect_error<TypeError>([&] { neg(b); }, "neg");
  expect_error<TypeError>([&] { abs(b); }, "abs");
  expect_error<TypeError>([&] { relu(b); }, "relu");
  expect_error<TypeError>([&] { gelu(i); }, "gelu");
  expect_error<TypeError>([&] { silu(i); }, "silu");
  expect_error<ValueError>([&] { gelu(f64({1.0}), "fast"); }, "gelu");
  expect_error<ValueError>([&] { clamp(f64({1.0}), std::nullopt, std::nullopt); }, "clamp");
  expect_error<ValueError>([&] { exp(Tensor()); }, "exp");
}

TEST(Unary, StridedAndLargeInputsMatchContiguous) {
  // Large enough for several parallel chunks; a transposed view goes through
  // the strided path and must give the same bits as the contiguous copy.
  manual_seed(3);
  const Tensor x = randn({300, 257});
  const Tensor xt = x.t();
  ASSERT_FALSE(xt.is_contiguous());
  const Tensor xc = xt.contiguous();
  for (auto fn : {+[](const Tensor& t) { return exp(t); }, +[](const Tensor& t) { return gelu(t); },
                  +[](const Tensor& t) { return relu(t); }, +[](const Tensor& t) { return tanh(t); },
                  +[](const Tensor& t) { return clamp(t, -0.5, 0.5); }}) {
    EXPECT_TRUE(testing::bitwise_equal(fn(xt), fn(xc)));
  }
  // Elementwise correctness at a few positions of the big tensor (float32
  // exp is within an ulp of the exact value).
  const auto v = x.to_vector<float>();
  const auto e = exp(x).to_vector<float>();
  for (size_t k : {size_t(0), size_t(12345), v.size() - 1})
    EXPECT_NEAR(e[k], std::exp(double(v[k])), 1.2e-7 * std::exp(double(v[k])));
  // A step slice (stride 2) through the strided path.
  const Tensor s = f64({-1, 10, -2, 20, -3, 30}).slice(0, 0, std::nullopt, 2);
  EXPECT_TRUE(allclose(abs(s), {1, 2, 3}, 0, 0));
  // Zero-element and 0-d tensors.
  EXPECT_EQ(exp(zeros({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_TRUE(allclose(sqrt(full({}, 4.0)), {2.0}, 0, 0));
}

TEST(Unary, InPlaceWritesThroughViews) {
  Tensor x = f64({-1, -2, 3, -4, 5});
  Tensor v = x.slice(0, 1, 4);
  Tensor& r = v.relu_();
  EXPECT_EQ(&r, &v);
  EXPECT_TRUE(allclose(x, {-1, 0, 3, 0, 5}, 0, 0));
  x.neg_();
  EXPECT_TRUE(allclose(x, {1, 0, -3, 0, -5}, 0, 0));
  x.clamp_(-4, 0.5);
  EXPECT_TRUE(allclose(x, {0.5, 0, -3, 0, -4}, 0, 0));
  Tensor y = f64({0, 1, 2, 3}, {2, 2});
  y.t().exp_();  // transposed view: every element still written once
  EXPECT_TRUE(allclose(y, {1.0, std::exp(1.0), std::exp(2.0), std::exp(3.0)}, 0, 1e-15));
  Tensor z = f64({4, 9, 16});
  z.sqrt_();
  EXPECT_TRUE(allclose(z, {2, 3, 4}, 0, 0));
  z.tanh_();
  EXPECT_TRUE(allclose(z, {std::tanh(2.0), std::tanh(3.0), std::tanh(4.0)}, 0, 1e-15));
  Tensor w = f64({0.0});
  w.sigmoid_();
  EXPECT_TRUE(allclose(w, {0.5}, 0, 0));
  // Integer in-place ops that keep the dtype are fine.
  Tensor i = from_vector(std::vector<int64_t>{-3, 4});
  i.relu_();
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 4}));
  i.clamp_(1, 2);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST(Unary, InPlaceErrors) {
  Tensor i = from_vector(std::vector<int64_t>{1, 2});
  expect_error<TypeError>([&] { i.exp_(); }, "exp_");
  expect_error<TypeError>([&] { i.sqrt_(); }, "sqrt_");
  expect_error<TypeError>([&] { i.clamp_(0.5, std::nullopt); }, "clamp_");
  Tensor e = f64({1.0}).expand({3});
  expect_error<ValueError>([&] { e.relu_(); }, "relu_");
  Tensor leaf = testing::leaf({3});
  expect_error<ValueError>([&] { leaf.exp_(); }, "exp_");
  {
    NoGradGuard ng;
    leaf.exp_();  // allowed outside grad mode (an optimizer-style update)
  }
}

TEST(Unary, InPlaceBumpsVersionAndBreaksSavedTensors) {
  Tensor a = testing::leaf({4});
  Tensor y = exp(a);   // saves its output y
  Tensor z = mul(y, 1.0);
  y.relu_();           // modifies the saved output
  EXPECT_THROW(sum(z).backward(), Error);
  // Without the in-place write the same graph back-propagates.
  Tensor y2 = exp(a);
  sum(y2).backward();
  EXPECT_TRUE(allclose(a.grad(), exp(a.detach()).to_vector<double>(), 0, 1e-15));
}

TEST(Unary, InPlaceGradientsFlowThroughEarlierOps) {
  // y = exp_(a * 3) → dy/da = 3 exp(3a); the in-place node must chain to MulBackward.
  Tensor a = testing::leaf({3});
  Tensor y = mul(a, 3.0);
  y.exp_();
  EXPECT_EQ(y.grad_fn_name(), "ExpBackward");
  sum(y).backward();
  const auto av = a.detach().to_vector<double>();
  std::vector<double> expected;
  for (double v : av) expected.push_back(3 * std::exp(3 * v));
  EXPECT_TRUE(allclose(a.grad(), expected, 0, 1e-14));
}

// ---- gradient checks (float64 finite differences) ----------------------------------------

using Fn = Tensor (*)(const Tensor&);

TEST(UnaryGrad, OutOfPlaceOps) {
  // Inputs away from kinks (0 for abs/relu) and inside the domain of log/sqrt.
  const std::vector<std::pair<const char*, Fn>> anywhere = {
      {"neg", +[](const Tensor& t) { return neg(t); }},
      {"abs", +[](const Tensor& t) { return abs(t); }},
      {"exp", +[](const Tensor& t) { return exp(t); }},
      {"tanh", +[](const Tensor& t) { return tanh(t); }},
      {"sigmoid", +[](const Tensor& t) { return sigmoid(t); }},
      {"relu", +[](const Tensor& t) { return relu(t); }},
      {"reciprocal", +[](const Tensor& t) { return reciprocal(t); }},
      {"gelu", +[](const Tensor& t) { return gelu(t); }},
      {"gelu_tanh", +[](const Tensor& t) { return gelu(t, "tanh"); }},
      {"silu", +[](const Tensor& t) { return silu(t); }},
      {"clamp", +[](const Tensor& t) { return clamp(t, -0.5, 0.6); }},
      {"clamp_min", +[](const Tensor& t) { return clamp(t, 0.1, std::nullopt); }},
  };
  const Tensor x = f64({-1.3, -0.7, -0.2, 0.3, 0.8, 1.7}, {2, 3});
  for (const auto& [name, fn] : anywhere) {
    Tensor leaf = x.clone();
    leaf.requires_grad_();
    EXPECT_TRUE(gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0]); }, {leaf}))
        << name;
  }
  const std::vector<std::pair<const char*, Fn>> positive = {
      {"log", +[](const Tensor& t) { return log(t); }},
      {"sqrt", +[](const Tensor& t) { return sqrt(t); }},
      {"rsqrt", +[](const Tensor& t) { return rsqrt(t); }},
  };
  const Tensor p = f64({0.4, 0.9, 1.5, 2.5});
  for (const auto& [name, fn] : positive) {
    Tensor leaf = p.clone();
    leaf.requires_grad_();
    EXPECT_TRUE(gradcheck([fn = fn](const std::vector<Tensor>& in) { return fn(in[0]); }, {leaf}))
        << name;
  }
}

TEST(UnaryGrad, InPlaceOpsReuseTheOutOfPlaceRules) {
  using InplaceFn = void (*)(Tensor&);
  const std::vector<std::pair<const char*, InplaceFn>> ops = {
      {"neg_", +[](Tensor& t) { t.neg_(); }},
      {"exp_", +[](Tensor& t) { t.exp_(); }},
      {"tanh_", +[](Tensor& t) { t.tanh_(); }},
      {"sigmoid_", +[](Tensor& t) { t.sigmoid_(); }},
      {"relu_", +[](Tensor& t) { t.relu_(); }},
      {"clamp_", +[](Tensor& t) { t.clamp_(-0.5, 0.7); }},  // away from y = 2x
  };
  const Tensor x = f64({-1.3, -0.7, -0.2, 0.3, 0.8, 1.7});
  for (const auto& [name, fn] : ops) {
    Tensor leaf = x.clone();
    leaf.requires_grad_();
    EXPECT_TRUE(gradcheck(
        [fn = fn](const std::vector<Tensor>& in) {
          Tensor y = mul(in[0], 2.0);  // a non-leaf to write into
          fn(y);
          return y;
        },
        {leaf}))
        << name;
  }
  // sqrt_ needs a positive domain.
  Tensor p = f64({0.4, 0.9, 1.5});
  p.requires_grad_();
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor y = mul(in[0], 2.0);
        y.sqrt_();
        return y;
      },
      {p}));
}

// clamp by name without float_bounds: a bound an integer result cannot hold
// (NaN, out of range) is a ValueError, not an undefined conversion (found by
// the dispatch fuzzer).
TEST(Unary, ClampBoundsMustFitAnIntegerResult) {
  const OpDef& row = op("clamp");
  const Tensor x = from_vector<int64_t>({-5, 0, 7}, {3});
  EXPECT_THROW((void)dispatch1(row, {x}, Attrs{{"min", std::nan("")}}), ValueError);
  EXPECT_THROW((void)dispatch1(row, {x}, Attrs{{"max", 1e30}}), ValueError);
  EXPECT_THROW((void)dispatch1(row, {from_vector<int32_t>({1}, {1})}, Attrs{{"min", 3e9}}),
               ValueError);
  EXPECT_EQ(dispatch1(row, {x}, Attrs{{"min", -1.0}, {"max", 5.0}}).to_vector<int64_t>(),
            (std::vector<int64_t>{-1, 0, 5}));
  EXPECT_EQ(clamp(x, std::nan(""), std::nullopt).dtype(), kFloat32);  // promoted, as PyTorch
}

}  // namespace
}  // namespace dtr
