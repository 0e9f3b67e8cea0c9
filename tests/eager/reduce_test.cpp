// Reductions: sum, mean, var, max, argmax, argmin, amax, amin, logsumexp,
// and the scan cumsum. Expected values computed with
// PyTorch (torch.var etc.) or by hand; gradients checked by finite differences.
#include <cmath>
#include <limits>
#include <string>

#include "core/parallel.h"
#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

/// Runs f, expecting error type E whose message contains `needle` (the op name).
template <typename E, typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception naming '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

/// 0, 1, ..., 23 as float32 of shape (2, 3, 4).
Tensor arange24() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[size_t(i)] = float(i);
  return from_vector(v, {2, 3, 4});
}

/// Restores the kernel thread count at scope exit.
struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

TEST(Reduce, SumOverAllAndSelectedDims) {
  const Tensor x = arange24();
  const Tensor all = sum(x);
  EXPECT_EQ(all.dim(), 0);
  EXPECT_EQ(all.dtype(), kFloat32);
  EXPECT_EQ(all.item<double>(), 276.0);

  const Tensor d1 = sum(x, {1});
  EXPECT_EQ(d1.shape(), (Shape{2, 4}));
  EXPECT_TRUE(testing::allclose(d1, {12, 15, 18, 21, 48, 51, 54, 57}));

  const Tensor d02 = sum(x, {0, -1}, /*keepdim=*/true);
  EXPECT_EQ(d02.shape(), (Shape{1, 3, 1}));
  EXPECT_TRUE(testing::allclose(d02, {60, 92, 124}));

  // Order of dims does not matter.
  EXPECT_TRUE(testing::bitwise_equal(sum(x, {2, 0}), sum(x, {0, 2})));
  EXPECT_TRUE(testing::allclose(x.sum({0}), {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}));
}

TEST(Reduce, SumOfIntegersAndBoolIsInt64) {
  const Tensor i = from_vector(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor s = sum(i, {1});
  EXPECT_EQ(s.dtype(), kInt64);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{6, 15}));
  // Above 2^53: exact in int64, not in double.
  const int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(sum(from_vector(std::vector<int64_t>{big, 2})).item<int64_t>(), big + 2);
  const Tensor b = from_vector(std::vector<bool>{true, false, true, true});
  EXPECT_EQ(sum(b).dtype(), kInt64);
  EXPECT_EQ(sum(b).item<int64_t>(), 3);
}

TEST(Reduce, SumReadsStridedViews) {
  const Tensor x = arange24();
  const Tensor t = transpose(x, 0, 2);  // (4, 3, 2), not contiguous
  ASSERT_FALSE(t.is_contiguous());
  EXPECT_TRUE(testing::allclose(sum(t, {0}), sum(x, {2}).transpose(0, 1).contiguous().to_vector<double>()));
  EXPECT_TRUE(testing::allclose(sum(t, {2}), sum(x, {0}).transpose(0, 1).contiguous().to_vector<double>()));
  EXPECT_EQ(sum(t).item<double>(), 276.0);
  EXPECT_TRUE(testing::allclose(std::get<0>(max(t, 1)), {8, 20, 9, 21, 10, 22, 11, 23}));
  EXPECT_EQ(argmax(t, 2).to_vector<int64_t>(), std::vector<int64_t>(12, 1));
}

TEST(Reduce, Float32SumsAccumulateInDouble) {
  // A float32 running sum of a million 0.1f drifts by about 1%; the double
  // accumulator stays within float32 rounding of the exact 100000.00149.
  const Tensor x = full({1000000}, 0.1, kFloat32);
  EXPECT_NEAR(sum(x).item<double>(), 100000.00149011612, 0.01);
  EXPECT_NEAR(mean(x).item<double>(), 0.100000001490116, 1e-9);
  const Tensor cols = full({250000, 4}, 0.1, kFloat32);
  EXPECT_TRUE(testing::allclose(sum(cols, {0}), std::vector<double>(4, 25000.000372529), 0.01, 0));
}

TEST(Reduce, ResultsDoNotDependOnThreadCount) {
  ThreadsGuard guard;
  manual_seed(3);
  const Tensor flat = randn({1 << 20});
  const Tensor wide = randn({4, 300000});    // few outputs, long rows: block-split path
  const Tensor tall = randn({300000, 3});    // few outputs, strided reduction
  const Tensor mat = randn({512, 700});      // column sums: tiled path
  auto run = [&] {
    return std::vector<Tensor>{sum(flat), mean(flat), max(flat), sum(wide, {1}), var(wide, {1}),
                               sum(tall, {0}), std::get<1>(max(tall, 0)), sum(mat, {0}),
                               sum(mat, {1}), var(mat, {0})};
  };
  set_num_threads(1);
  const std::vector<Tensor> one = run();
  for (int threads : {2, 3, 7}) {
    set_num_threads(threads);
    const std::vector<Tensor> many = run();
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(testing::bitwise_equal(one[i], many[i])) << i;
  }
  // And the values are right: compare with a double reference.
  const std::vector<double> v = tall.to_vector<double>();
  double ref[3] = {0, 0, 0};
  for (size_t i = 0; i < v.size(); ++i) ref[i % 3] += v[i];
  EXPECT_TRUE(testing::allclose(one[5], {ref[0], ref[1], ref[2]}, 1e-3, 1e-6));
  const std::vector<double> m = mat.to_vector<double>();
  double col0 = 0;
  for (size_t r = 0; r < 512; ++r) col0 += m[r * 700];
  EXPECT_NEAR(one[7].to_vector<double>()[0], col0, 1e-4);
}

TEST(Reduce, MeanValuesAndEmptyReduction) {
  const Tensor x = arange24();
  EXPECT_EQ(mean(x).item<double>(), 11.5);
  EXPECT_TRUE(testing::allclose(mean(x, {1, 2}), {5.5, 17.5}));
  EXPECT_TRUE(testing::allclose(x.mean({2}, true), {1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
  EXPECT_EQ(x.mean({2}, true).shape(), (Shape{2, 3, 1}));
  // torch.empty(0, 3).mean(0) is NaN; its sum is 0.
  const Tensor e = zeros({0, 3});
  EXPECT_TRUE(testing::allclose(mean(e, {0}), {NAN, NAN, NAN}));
  EXPECT_TRUE(testing::allclose(sum(e, {0}), {0, 0, 0}));
}

TEST(Reduce, ZeroDimTensorsReduceToThemselves) {
  const Tensor s = full({}, 5.0);
  EXPECT_EQ(sum(s, {0}).item<double>(), 5.0);
  EXPECT_EQ(sum(s, {-1}).item<double>(), 5.0);
  EXPECT_EQ(std::get<1>(max(s, 0)).item<int64_t>(), 0);
}

TEST(Reduce, HalfPrecisionInputsComputeInFloat32) {
  const Tensor h = full({4096}, 1.0, kFloat16);
  // float16 cannot count past 2048 by ones; the float accumulator can.
  EXPECT_EQ(sum(h).dtype(), kFloat16);
  EXPECT_EQ(sum(h).item<double>(), 4096.0);
  const Tensor b = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).to(kBFloat16);
  EXPECT_TRUE(testing::allclose(mean(b, {1}), {1.5, 3.5}));
  EXPECT_TRUE(testing::allclose(var(b, {1}), {0.5, 0.5}));
  EXPECT_EQ(max(b).item<double>(), 4.0);
}

TEST(Reduce, VarWithCorrection) {
  const Tensor x = from_vector(std::vector<double>{0.5, -1.25, 2.0, 3.5, 1.0, 0.25, -0.75, 4.0, -2.0, 1.5, 0.0, 0.5},
                               {3, 4});
  // torch.var(x), torch.var(x, 1, unbiased=False), torch.var(x, 0, keepdim=True)
  EXPECT_TRUE(testing::allclose(var(x), {3.187026515151515}, 1e-12, 1e-12));
  EXPECT_TRUE(testing::allclose(var(x, {1}, 0), {3.10546875, 3.140625, 1.625}, 1e-12, 1e-12));
  const Tensor k = var(x, {0}, 1, true);
  EXPECT_EQ(k.shape(), (Shape{1, 4}));
  EXPECT_TRUE(testing::allclose(k, {2.5833333333333335, 1.8958333333333335, 2.0208333333333335, 3.583333333333334},
                                1e-12, 1e-12));
  // correction >= N divides by zero, like PyTorch: inf.
  EXPECT_TRUE(testing::allclose(var(x, {0}, 3), {INFINITY, INFINITY, INFINITY, INFINITY}));
}

TEST(Reduce, MaxAndArgmaxPickTheFirstMaximum) {
  const Tensor x = from_vector(std::vector<float>{1, 5, 5, 2, 7, 0, 7, 3, -1}, {3, 3});
  EXPECT_EQ(max(x).item<double>(), 7.0);
  EXPECT_EQ(x.max().dim(), 0);
  auto [values, indices] = max(x, 1);
  EXPECT_TRUE(testing::allclose(values, {5, 7, 7}));
  EXPECT_EQ(indices.dtype(), kInt64);
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
  auto [v0, i0] = max(x, 0, /*keepdim=*/true);
  EXPECT_EQ(v0.shape(), (Shape{1, 3}));
  EXPECT_TRUE(testing::allclose(v0, {7, 7, 5}));
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(argmax(x, -1).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(x.argmax(0, true).shape(), (Shape{1, 3}));
  // Integer inputs keep their dtype and exact values.
  const Tensor i = from_vector(std::vector<int64_t>{(int64_t{1} << 60) + 1, int64_t{1} << 60});
  EXPECT_EQ(max(i).item<int64_t>(), (int64_t{1} << 60) + 1);
  EXPECT_EQ(argmax(i, 0).item<int64_t>(), 0);
}

TEST(Reduce, MaxPropagatesNaN) {
  const Tensor x = from_vector(std::vector<double>{1, NAN, 3, NAN}, {4});
  EXPECT_TRUE(std::isnan(max(x).item<double>()));
  EXPECT_EQ(argmax(x, 0).item<int64_t>(), 1);
  const Tensor y = from_vector(std::vector<double>{-INFINITY, -INFINITY});
  EXPECT_EQ(argmax(y, 0).item<int64_t>(), 0);
  EXPECT_EQ(max(y).item<double>(), -INFINITY);
}

TEST(Reduce, BadArgumentsThrowTypedErrors) {
  const Tensor x = arange24();
  expect_error<IndexError>([&] { sum(x, {3}); }, "sum");
  expect_error<IndexError>([&] { mean(x, {-4}); }, "mean");
  expect_error<ValueError>([&] { sum(x, {1, -2}); }, "sum");
  expect_error<IndexError>([&] { var(x, {5}); }, "var");
  expect_error<IndexError>([&] { max(x, 3); }, "max");
  expect_error<IndexError>([&] { argmax(x, -4); }, "argmax");
  expect_error<TypeError>([&] { mean(from_vector(std::vector<int64_t>{1, 2})); }, "mean");
  expect_error<TypeError>([&] { var(from_vector(std::vector<int64_t>{1, 2})); }, "var");
  expect_error<ValueError>([&] { max(zeros({0})); }, "max");
  expect_error<ValueError>([&] { max(zeros({2, 0}), 1); }, "max");
  expect_error<ValueError>([&] { argmax(zeros({0, 2}), 0); }, "argmax");
  expect_error<ValueError>([&] { var(x, {0}, -1); }, "var");
}

TEST(Reduce, GradientsOfSumAndMean) {
  // d sum / dx = 1; d mean / dx = 1/N, broadcast back.
  Tensor x = testing::leaf({2, 3});
  sum(x, {1}).backward(ones({2}, kFloat64));
  EXPECT_TRUE(testing::allclose(x.grad(), {1, 1, 1, 1, 1, 1}));
  Tensor y = testing::leaf({2, 4});
  mean(y, {1}, true).backward(from_vector(std::vector<double>{4, 8}, {2, 1}));
  EXPECT_TRUE(testing::allclose(y.grad(), {1, 1, 1, 1, 2, 2, 2, 2}));

  using V = std::vector<Tensor>;
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return sum(in[0]); }, {testing::leaf({3, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return sum(in[0], {0, 2}); }, {testing::leaf({2, 3, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return sum(in[0], {1}, true); }, {testing::leaf({2, 3, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return mean(in[0], {-1}); }, {testing::leaf({3, 5})}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return mean(in[0]); }, {testing::leaf({2, 2, 3})}));
}

TEST(Reduce, GradientsOfVarAndMax) {
  using V = std::vector<Tensor>;
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return var(in[0]); }, {testing::leaf({3, 4}, 2)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return var(in[0], {0}, 0, true); }, {testing::leaf({4, 3}, 3)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return var(in[0], {1, 2}, 1); }, {testing::leaf({2, 3, 4}, 4)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return max(in[0]); }, {testing::leaf({3, 4}, 5)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return std::get<0>(max(in[0], 1)); }, {testing::leaf({3, 4}, 6)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return std::get<0>(max(in[0], 0, true)); },
                                 {testing::leaf({3, 2, 2}, 7)}));
}

TEST(Reduce, MaxGradientIsSharedAmongTies) {
  // torch: x = [1, 3, 3]; x.max().backward() → [0, 0.5, 0.5].
  Tensor x = from_vector(std::vector<double>{1, 3, 3});
  x.requires_grad_();
  max(x).backward();
  EXPECT_TRUE(testing::allclose(x.grad(), {0, 0.5, 0.5}));
  // Over a dim only the selected (first) index gets the gradient.
  Tensor y = from_vector(std::vector<double>{3, 3, 1, 2}, {2, 2});
  y.requires_grad_();
  std::get<0>(max(y, 1)).backward(ones({2}, kFloat64));
  EXPECT_TRUE(testing::allclose(y.grad(), {1, 0, 0, 1}));
}

// sum_backward by name with a dim outside its shape (found by the dispatch
// fuzzer: it indexed the shape with it).
TEST(Reduce, SumBackwardChecksItsDims) {
  const OpDef& row = op("sum_backward");
  const Tensor g = ones({2});
  EXPECT_THROW((void)dispatch1(row, {g}, Attrs{{"shape", Shape{2, 3}}, {"dims", Shape{7}}, {"divisor", int64_t(1)}}),
               ValueError);
  EXPECT_THROW((void)dispatch1(row, {g}, Attrs{{"shape", Shape{2, 3}}, {"dims", Shape{-1}}, {"divisor", int64_t(1)}}),
               ValueError);
  EXPECT_EQ(dispatch1(row, {g}, Attrs{{"shape", Shape{2, 3}}, {"dims", Shape{1}}, {"divisor", int64_t(1)}}).shape(),
            (Shape{2, 3}));
}

// ---- argmin, amax, amin ---------------------------------------------------------

TEST(Reduce, ArgminTakesTheFirstOccurrenceAndNaN) {
  const Tensor x = from_vector(std::vector<double>{2, 1, 1, 3, 0, 5, 0, 0}, {2, 4});
  EXPECT_EQ(argmin(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmin(x, 0, true).shape(), (Shape{1, 4}));
  EXPECT_EQ(argmin(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1, 1}));
  EXPECT_EQ(x.argmin(-1).dtype(), kInt64);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // torch.argmin(torch.tensor([1., nan, 0.])) == 1: NaN counts as the minimum.
  EXPECT_EQ(argmin(from_vector(std::vector<double>{1, nan, 0}), 0).item<int64_t>(), 1);
  EXPECT_EQ(argmin(from_vector(std::vector<int64_t>{4, -2, -2}), 0).item<int64_t>(), 1);
  expect_error<IndexError>([&] { (void)argmin(x, 2); }, "argmin");
  expect_error<ValueError>([&] { (void)argmin(zeros({2, 0}), 1); }, "argmin");
}

TEST(Reduce, AmaxAminValuesDtypesAndNaN) {
  const Tensor x = from_vector(std::vector<double>{1, 3, 3, 2, -1, -1}, {2, 3});
  EXPECT_TRUE(testing::allclose(amax(x, {1}), {3, 2}, 0));
  EXPECT_TRUE(testing::allclose(amin(x, {1}), {1, -1}, 0));
  EXPECT_TRUE(testing::allclose(amax(x), {3}, 0));
  EXPECT_EQ(amax(x).dim(), 0);
  EXPECT_EQ(amin(x, {0}, true).shape(), (Shape{1, 3}));
  EXPECT_TRUE(testing::allclose(x.amin({0, 1}), {-1}, 0));
  const Tensor i = from_vector(std::vector<int64_t>{5, -7, 2});
  EXPECT_EQ(amax(i).dtype(), kInt64);
  EXPECT_EQ(amin(i).item<int64_t>(), -7);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(amax(from_vector(std::vector<double>{1, nan, 0})).item<double>()));
  EXPECT_TRUE(std::isnan(amin(from_vector(std::vector<double>{1, nan, 0})).item<double>()));
  // A 0-d input is its own extreme; an empty kept dim gives an empty result.
  EXPECT_EQ(amax(full({}, 2.5, kFloat64), {0}).item<double>(), 2.5);
  EXPECT_EQ(amax(zeros({0, 3}), {1}).shape(), (Shape{0}));
}

TEST(Reduce, AmaxAminErrorsAreTyped) {
  const Tensor x = zeros({2, 3});
  expect_error<IndexError>([&] { (void)amax(x, {5}); }, "amax");
  expect_error<IndexError>([&] { (void)amin(x, {-3}); }, "amin");
  expect_error<ValueError>([&] { (void)amax(x, {0, 0}); }, "amax");
  // torch: "amax(): Expected reduction dim 0 to have non-zero size" (IndexError).
  expect_error<IndexError>([&] { (void)amax(zeros({0, 3}), {0}); }, "amax");
  expect_error<IndexError>([&] { (void)amin(zeros({0, 3})); }, "amin");
}

TEST(Reduce, AmaxAminGradientIsSharedAmongTies) {
  // torch: x = [[1, 3, 3], [2, -1, -1]]; x.amax(1).backward(ones) → [[0, .5, .5], [1, 0, 0]].
  Tensor x = from_vector(std::vector<double>{1, 3, 3, 2, -1, -1}, {2, 3});
  x.requires_grad_();
  amax(x, {1}).backward(ones({2}, kFloat64));
  EXPECT_TRUE(testing::allclose(x.grad(), {0, 0.5, 0.5, 1, 0, 0}, 0));
  Tensor y = from_vector(std::vector<double>{1, 3, 3, 2, -1, -1}, {2, 3});
  y.requires_grad_();
  mul(amin(y, {}, true), 4.0).sum().backward();
  EXPECT_TRUE(testing::allclose(y.grad(), {0, 0, 0, 0, 2, 2}, 0));
  // Ties across a multi-dim reduction, keepdim off.
  Tensor z = from_vector(std::vector<double>{5, 1, 5, 5, 0, 2}, {3, 2});
  z.requires_grad_();
  amax(z, {0, 1}).backward(full({}, 3.0, kFloat64));
  EXPECT_TRUE(testing::allclose(z.grad(), {1, 0, 1, 1, 0, 0}, 1e-15));
}

// ---- logsumexp ---------------------------------------------------------------------

TEST(Reduce, LogsumexpIsStable) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(testing::allclose(logsumexp(from_vector(std::vector<double>{1000, 1000}), {0}),
                                {1000 + std::log(2.0)}, 0, 1e-15));
  EXPECT_EQ(logsumexp(from_vector(std::vector<double>{inf, 1}), {0}).item<double>(), inf);
  EXPECT_EQ(logsumexp(from_vector(std::vector<double>{-inf, -inf}), {0}).item<double>(), -inf);
  EXPECT_EQ(logsumexp(from_vector(std::vector<double>{-inf, 0}), {0}).item<double>(), 0.0);
  // torch.logsumexp(torch.zeros(0, 3), 0) == [-inf, -inf, -inf].
  EXPECT_TRUE(testing::allclose(logsumexp(zeros({0, 3}), {0}), {-inf, -inf, -inf}));
  // Integer inputs give float32 (torch.logsumexp(torch.tensor([1, 2]), 0) == 2.3133).
  const Tensor li = logsumexp(from_vector(std::vector<int64_t>{1, 2}), {0});
  EXPECT_EQ(li.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(li, {std::log(std::exp(1.0) + std::exp(2.0))}));
  EXPECT_EQ(logsumexp(zeros({2, 3}), {1}, true).shape(), (Shape{2, 1}));
  expect_error<IndexError>([] { (void)logsumexp(zeros({2, 3}), {2}); }, "logsumexp");
  expect_error<ValueError>([] { (void)logsumexp(zeros({2, 3}), {1, -1}); }, "logsumexp");
}

TEST(Reduce, LogsumexpGradientIsTheSoftmax) {
  Tensor x = from_vector(std::vector<double>{0, 1, 2, 800, 800, 801}, {2, 3});
  x.requires_grad_();
  logsumexp(x, {1}).backward(from_vector(std::vector<double>{1, 2}));
  const double s = std::exp(0.0) + std::exp(1.0) + std::exp(2.0);
  const double t = 2 + std::exp(1.0);
  EXPECT_TRUE(testing::allclose(x.grad(), {1 / s, std::exp(1.0) / s, std::exp(2.0) / s, 2 / t, 2 / t,
                                           2 * std::exp(1.0) / t},
                                1e-15, 1e-12));
}

// ---- cumsum -----------------------------------------------------------------------

TEST(Reduce, CumsumValuesAndDtypes) {
  const Tensor x = arange24();
  const Tensor c = cumsum(x, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(c.dtype(), kFloat32);
  // Element (1, 2, 3) = 15 + 19 + 23.
  EXPECT_EQ(c.to_vector<float>()[23], 57.0f);
  EXPECT_TRUE(testing::allclose(cumsum(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}), -1), {1, 3, 3, 7}, 0));
  EXPECT_TRUE(testing::allclose(cumsum(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}), 0), {1, 2, 4, 6}, 0));
  // Integer and bool inputs give int64, as torch.cumsum.
  const Tensor ci = cumsum(from_vector(std::vector<int32_t>{3, -1, 4}), 0);
  EXPECT_EQ(ci.dtype(), kInt64);
  EXPECT_EQ(ci.to_vector<int64_t>(), (std::vector<int64_t>{3, 2, 6}));
  const Tensor cb = from_vector(std::vector<bool>{true, false, true}).cumsum(0);
  EXPECT_EQ(cb.dtype(), kInt64);
  EXPECT_EQ(cb.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(cumsum(full({}, 2.0, kFloat64), -1).item<double>(), 2.0);
  EXPECT_EQ(cumsum(zeros({0, 2}), 0).shape(), (Shape{0, 2}));
  // A non-contiguous input.
  EXPECT_TRUE(testing::allclose(cumsum(transpose(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}), 0, 1), 1),
                                {1, 4, 2, 6}, 0));
  expect_error<IndexError>([&] { (void)cumsum(x, 3); }, "cumsum");
  expect_error<IndexError>([&] { (void)cumsum(x, -4); }, "cumsum");
}

TEST(Reduce, CumsumGradientIsTheReversedCumsum) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  x.requires_grad_();
  cumsum(x, 1).backward(from_vector(std::vector<double>{1, 2, 3, 10, 20, 30}, {2, 3}));
  EXPECT_TRUE(testing::allclose(x.grad(), {6, 5, 3, 60, 50, 30}, 0));
  // The sequential order does not depend on the thread count.
  std::vector<float> v(50000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i)));
  const Tensor big = from_vector(v, {2, 25000});
  ThreadsGuard guard;
  set_num_threads(1);
  const Tensor one = cumsum(big, 1);
  set_num_threads(4);
  EXPECT_TRUE(testing::bitwise_equal(cumsum(big, 1), one));
}

}  // namespace
}  // namespace dtr
