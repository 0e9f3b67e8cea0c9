// embedding and dropout: values, typed errors, float64 gradient checks,
// deterministic gradient accumulation, and dropout's Philox mask
// (same (seed, offset) → same mask; gradient zero exactly where dropped).
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

}  // namespace
}  // namespace dtr
