// embedding and dropout: values, typed errors, float64 gradient checks,
// deterministic gradient accumulation, and dropout's Philox mask
// (same (seed, offset) → same mask; gradient zero exactly where dropped).
// one_hot: values, inference of num_classes, typed errors. multinomial:
// frequencies over many draws, zero-probability categories never drawn,
// distinct samples without replacement, reseeding, typed errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/parallel.h"
#include "core/philox.h"
#include "dtr/dtr.h"
#include "eager/dispatch.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using testing::error_message;

Tensor weight_5x3() {
  std::vector<double> v(15);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) + 0.5;
  return from_vector(v, {5, 3});
}

TEST(Embedding, GathersRows) {
  Tensor w = weight_5x3();
  Tensor idx = from_vector(std::vector<int64_t>{4, 0, 2, 2}, {2, 2});
  Tensor y = embedding(w, idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_TRUE(testing::allclose(y, {12.5, 13.5, 14.5, 0.5, 1.5, 2.5, 6.5, 7.5, 8.5, 6.5, 7.5, 8.5}, 0));
  // int32 indices, float32 weight, 0-d index.
  Tensor y32 = embedding(w.to(kFloat32), from_vector(std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(testing::allclose(y32, {3.5, 4.5, 5.5, 9.5, 10.5, 11.5}, 0));
  EXPECT_EQ(embedding(w, reshape(from_vector(std::vector<int64_t>{3}), {})).shape(), (Shape{3}));
}

TEST(Embedding, OutOfRangeIndexNamesTheValue) {
  Tensor w = weight_5x3();
  const std::string msg =
      error_message([&] { embedding(w, from_vector(std::vector<int64_t>{1, 7, 2})); });
  EXPECT_NE(msg.find("embedding"), std::string::npos) << msg;
  EXPECT_NE(msg.find("7"), std::string::npos) << msg;
  EXPECT_THROW(embedding(w, from_vector(std::vector<int64_t>{1, 7, 2})), IndexError);
  EXPECT_THROW(embedding(w, from_vector(std::vector<int64_t>{5})), IndexError);
  EXPECT_THROW(embedding(w, from_vector(std::vector<int64_t>{-1})), IndexError);
  EXPECT_THROW(embedding(w, from_vector(std::vector<float>{1})), TypeError);
  EXPECT_THROW(embedding(reshape(w, {15}), from_vector(std::vector<int64_t>{1})), ValueError);
}

TEST(Embedding, GradientCountsRepeatedRows) {
  Tensor w = weight_5x3();
  w.requires_grad_();
  Tensor idx = from_vector(std::vector<int64_t>{0, 2, 2, 4, 0, 1}, {2, 3});
  sum(embedding(w, idx)).backward();
  EXPECT_TRUE(testing::allclose(w.grad(), {2, 2, 2, 1, 1, 1, 2, 2, 2, 0, 0, 0, 1, 1, 1}, 0));
}

TEST(Embedding, Gradcheck) {
  Tensor idx = from_vector(std::vector<int64_t>{0, 2, 2, 4, 0, 1}, {2, 3});
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& x) { return embedding(x[0], idx); }, {testing::leaf({5, 3}, 1)}));
}

TEST(Embedding, GradientSameBitsForAnyThreadCount) {
  manual_seed(31);
  Tensor w = randn({50, 16});
  w.requires_grad_();
  Tensor idx = randint(0, 50, {4000});
  Tensor g = randn({4000, 16});
  auto run = [&](int threads) {
    set_num_threads(threads);
    w.set_grad(Tensor());
    sum(mul(embedding(w, idx), g)).backward();
    return w.grad();
  };
  const int before = num_threads();
  Tensor one = run(1), two = run(std::max(2, before));
  set_num_threads(before);
  EXPECT_TRUE(testing::bitwise_equal(one, two));
}

TEST(Dropout, MaskFollowsPhiloxAndScales) {
  manual_seed(41);
  Tensor x = add(rand({1000}), 0.5);  // nonzero everywhere
  const double p = 0.3;
  const RngState rng = get_rng_state();
  Tensor y = dropout(x, p);
  const auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const float scale = 1.0f / float(1.0 - p);
  int64_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool keep = double(u32_to_uniform(philox_u32(rng, i))) >= p;
    kept += keep;
    ASSERT_EQ(yv[i], keep ? xv[i] * scale : 0.0f) << i;
  }
  EXPECT_GT(kept, 600);
  EXPECT_LT(kept, 800);
}

TEST(Dropout, SameSeedAndOffsetSameMask) {
  Tensor x = ones({257, 3});
  manual_seed(42);
  const RngState s = get_rng_state();
  Tensor a = dropout(x, 0.5);
  Tensor b = dropout(x, 0.5);  // the offset moved on: another mask
  set_rng_state(s);
  Tensor c = dropout(x, 0.5);
  EXPECT_TRUE(testing::bitwise_equal(a, c));
  EXPECT_FALSE(testing::bitwise_equal(a, b));
}

TEST(Dropout, GradientZeroExactlyWhereOutputZeroed) {
  manual_seed(43);
  Tensor x = add(rand({500}), 1.0);
  x.requires_grad_();
  const double p = 0.4;
  Tensor y = dropout(x, p);
  sum(y).backward();
  const auto yv = y.to_vector<float>(), gv = x.grad().to_vector<float>();
  const float scale = 1.0f / float(1.0 - p);
  int64_t zeros = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (yv[i] == 0.0f) {
      ++zeros;
      EXPECT_EQ(gv[i], 0.0f) << i;
    } else {
      EXPECT_EQ(gv[i], scale) << i;
    }
  }
  EXPECT_GT(zeros, 0);
}

TEST(Dropout, Gradcheck) {
  const RngState s{7, 128};
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& x) {
        set_rng_state(s);  // the same mask for every evaluation
        return dropout(x[0], 0.35);
      },
      {testing::leaf({4, 5}, 2)}));
}

TEST(Dropout, IdentityCasesAndErrors) {
  Tensor x = rand({10});
  EXPECT_EQ(dropout(x, 0.5, /*training=*/false).impl(), x.impl());
  EXPECT_EQ(dropout(x, 0.0).impl(), x.impl());
  EXPECT_TRUE(testing::allclose(dropout(x, 1.0), std::vector<double>(10, 0.0), 0));
  EXPECT_THROW(dropout(x, -0.1), ValueError);
  EXPECT_THROW(dropout(x, 1.5), ValueError);
  const std::string msg = error_message([&] { dropout(x, 1.5); });
  EXPECT_NE(msg.find("dropout"), std::string::npos) << msg;
  EXPECT_THROW(dropout(ones({3}, kInt64), 0.5), TypeError);
  EXPECT_TRUE(op("dropout").flags.random);
}

TEST(Dropout, LowerPrecisionKeepsDtype) {
  manual_seed(44);
  Tensor x = ones({64}, kBFloat16);
  const auto v = dropout(x, 0.5).to_vector<float>();
  for (float e : v) EXPECT_TRUE(e == 0.0f || e == 2.0f) << e;
}

// embedding_backward and dropout_backward by name: shapes that do not fit
// are the caller's ValueError (the kernels index grad by the indices/mask).
TEST(NnFunctional, GradientRowsCheckTheirInputs) {
  const OpDef& eb = op("embedding_backward");
  const Tensor idx = from_vector<int64_t>({0, 2}, {2});
  const Attrs nw{{"num_weights", int64_t(3)}};
  EXPECT_EQ(dispatch1(eb, {ones({2, 4}), idx}, nw).shape(), (Shape{3, 4}));
  EXPECT_THROW((void)dispatch1(eb, {ones({3, 4}), idx}, nw), ValueError);
  EXPECT_THROW((void)dispatch1(eb, {ones({}), idx}, nw), ValueError);
  EXPECT_THROW((void)dispatch1(eb, {ones({2, 4}), idx}, Attrs{{"num_weights", int64_t(-1)}}),
               ValueError);
  const OpDef& db = op("dropout_backward");
  const Attrs p{{"p", 0.5}};
  EXPECT_EQ(dispatch1(db, {ones({4}), ones({4}, kBool)}, p).shape(), (Shape{4}));
  EXPECT_THROW((void)dispatch1(db, {ones({4}), ones({5}, kBool)}, p), ValueError);
  EXPECT_THROW((void)dispatch1(db, {ones({4}), ones({4})}, p), ValueError);
}

// ---- one_hot ------------------------------------------------------------------------

TEST(OneHot, ValuesAndInferredClasses) {
  const Tensor idx = from_vector(std::vector<int64_t>{0, 2, 1, 2}, {2, 2});
  const Tensor y = one_hot(idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(y.dtype(), kInt64);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(one_hot(idx, 5).shape(), (Shape{2, 2, 5}));
  EXPECT_EQ(one_hot(full({}, int64_t{1}, kInt64), 2).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  // torch: one_hot(torch.tensor([], dtype=long), 3).shape == (0, 3).
  EXPECT_EQ(one_hot(from_vector(std::vector<int64_t>{}), 3).shape(), (Shape{0, 3}));
  EXPECT_FALSE(y.requires_grad());
}

TEST(OneHot, ErrorsAreTyped) {
  const Tensor idx = from_vector(std::vector<int64_t>{1, 2});
  // torch: "Class values must be non-negative." / "... smaller than num_classes."
  EXPECT_THROW((void)one_hot(from_vector(std::vector<int64_t>{-1, 2})), IndexError);
  EXPECT_THROW((void)one_hot(from_vector(std::vector<int64_t>{0, -1}), 3), IndexError);
  EXPECT_THROW((void)one_hot(idx, 2), IndexError);
  EXPECT_NE(error_message([&] { (void)one_hot(idx, 2); }).find("one_hot"), std::string::npos);
  EXPECT_THROW((void)one_hot(idx, -2), ValueError);
  // torch: "Can not infer total number of classes from empty tensor."
  EXPECT_THROW((void)one_hot(from_vector(std::vector<int64_t>{})), ValueError);
  // torch: "one_hot is only applicable to index tensor."
  EXPECT_THROW((void)one_hot(from_vector(std::vector<int32_t>{1, 2})), TypeError);
  EXPECT_THROW((void)one_hot(from_vector(std::vector<double>{1, 2})), TypeError);
}

// ---- multinomial ------------------------------------------------------------------

/// Frequencies of the values 0..n-1 in an int64 tensor.
std::vector<double> frequencies(const Tensor& t, int64_t n) {
  std::vector<double> f(size_t(n), 0.0);
  const auto v = t.to_vector<int64_t>();
  for (int64_t x : v) {
    EXPECT_TRUE(x >= 0 && x < n) << x;
    if (x >= 0 && x < n) f[size_t(x)] += 1.0 / double(v.size());
  }
  return f;
}

TEST(Multinomial, FrequenciesWithReplacement) {
  manual_seed(7);
  // Unnormalized probabilities 1 : 0 : 3 : 6.
  const Tensor p = from_vector(std::vector<double>{1, 0, 3, 6});
  const Tensor s = multinomial(p, 40000, true);
  EXPECT_EQ(s.shape(), (Shape{40000}));
  EXPECT_EQ(s.dtype(), kInt64);
  const auto f = frequencies(s, 4);
  EXPECT_EQ(f[1], 0.0) << "a zero-probability category was drawn";
  // Standard deviation of a frequency at n = 40000 is at most 0.0025.
  EXPECT_NEAR(f[0], 0.1, 0.01);
  EXPECT_NEAR(f[2], 0.3, 0.01);
  EXPECT_NEAR(f[3], 0.6, 0.01);
  // Rows are distributions of their own (float32 too).
  const Tensor q = from_vector(std::vector<float>{1, 0, 0, 0, 0, 5}, {2, 3});
  const Tensor r = q.multinomial(100, true);
  EXPECT_EQ(r.shape(), (Shape{2, 100}));
  const auto v = r.to_vector<int64_t>();
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(v[i], 0);
  for (size_t i = 100; i < 200; ++i) EXPECT_EQ(v[i], 2);
}

TEST(Multinomial, WithoutReplacementSamplesAreDistinct) {
  manual_seed(11);
  // 4000 rows of 1 : 2 : 3 : 4, two samples each.
  std::vector<double> probs;
  for (int r = 0; r < 4000; ++r)
    for (double w : {1.0, 2.0, 3.0, 4.0}) probs.push_back(w);
  const Tensor s = multinomial(from_vector(probs, {4000, 4}), 2);
  EXPECT_EQ(s.shape(), (Shape{4000, 2}));
  const auto v = s.to_vector<int64_t>();
  std::vector<double> first(4, 0.0), second(4, 0.0);
  for (size_t r = 0; r < 4000; ++r) {
    ASSERT_NE(v[2 * r], v[2 * r + 1]) << "row " << r;
    first[size_t(v[2 * r])] += 1.0 / 4000;
    second[size_t(v[2 * r + 1])] += 1.0 / 4000;
  }
  // P(first = j) = p_j; P(second = j) = sum_{i != j} p_i p_j / (1 - p_i).
  const std::vector<double> p{0.1, 0.2, 0.3, 0.4};
  for (size_t j = 0; j < 4; ++j) {
    double want = 0;
    for (size_t i = 0; i < 4; ++i)
      if (i != j) want += p[i] * p[j] / (1 - p[i]);
    EXPECT_NEAR(first[j], p[j], 0.03) << j;
    EXPECT_NEAR(second[j], want, 0.03) << j;
  }
  // Every category once: a permutation; zero-probability categories never drawn.
  const Tensor all = multinomial(from_vector(std::vector<double>{1, 1, 1, 1, 1, 1}), 6);
  auto sorted = all.to_vector<int64_t>();
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  for (int t = 0; t < 20; ++t) {
    auto two = multinomial(from_vector(std::vector<double>{0, 2, 0, 1e-6}), 2).to_vector<int64_t>();
    std::sort(two.begin(), two.end());
    EXPECT_EQ(two, (std::vector<int64_t>{1, 3}));
  }
}

TEST(Multinomial, SameSeedSameSamples) {
  const Tensor p = from_vector(std::vector<double>{1, 2, 3, 4, 5}, {1, 5});
  manual_seed(3);
  const Tensor a = multinomial(p, 50, true);
  const Tensor a2 = multinomial(p, 3);
  manual_seed(3);
  EXPECT_TRUE(testing::bitwise_equal(multinomial(p, 50, true), a));
  EXPECT_TRUE(testing::bitwise_equal(multinomial(p, 3), a2));
  manual_seed(4);
  EXPECT_FALSE(testing::bitwise_equal(multinomial(p, 50, true), a));
}

TEST(Multinomial, ErrorsAreTyped) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // torch: "probability tensor contains either `inf`, `nan` or element < 0".
  EXPECT_THROW((void)multinomial(from_vector(std::vector<double>{-1, 2}), 1), ValueError);
  EXPECT_THROW((void)multinomial(from_vector(std::vector<double>{inf, 2}), 1), ValueError);
  EXPECT_THROW((void)multinomial(from_vector(std::vector<double>{nan, 2}), 1, true), ValueError);
  // torch: "invalid multinomial distribution (sum of probabilities <= 0)".
  EXPECT_THROW((void)multinomial(from_vector(std::vector<double>{1, 1, 0, 0}, {2, 2}), 1), ValueError);
  // torch: "cannot sample n_sample > prob_dist.size(-1) samples without replacement".
  EXPECT_THROW((void)multinomial(from_vector(std::vector<double>{1, 2}), 3), ValueError);
  // Not enough non-zero categories without replacement (PyTorch 2.x).
  EXPECT_THROW((void)multinomial(from_vector(std::vector<double>{0, 2, 0}), 2), ValueError);
  EXPECT_THROW((void)multinomial(from_vector(std::vector<double>{1, 2}), 0), ValueError);
  // torch: "prob_dist must be 1 or 2 dim".
  EXPECT_THROW((void)multinomial(ones({2, 2, 2}, kFloat64), 1), ValueError);
  EXPECT_THROW((void)multinomial(full({}, 1.0, kFloat64), 1), ValueError);
  // torch: "multinomial only supports floating-point dtypes for input".
  EXPECT_THROW((void)multinomial(from_vector(std::vector<int64_t>{1, 2}), 1), TypeError);
  EXPECT_NE(error_message([] { (void)multinomial(from_vector(std::vector<double>{-1, 2}), 1); }).find("multinomial"),
            std::string::npos);
  // With replacement more samples than categories are fine.
  EXPECT_EQ(multinomial(from_vector(std::vector<double>{1, 2}), 5, true).numel(), 5);
}

}  // namespace
}  // namespace dtr
