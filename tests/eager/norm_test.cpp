// layer_norm, rms_norm, batch_norm. Expected values from PyTorch 1.13
// (torch.nn.functional; rms_norm as x * rsqrt(mean(x^2) + eps) * w), pasted;
// gradients checked by finite differences in float64.
#include <string>

#include <gmock/gmock.h>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

template <typename E, typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception naming '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

using V = std::vector<Tensor>;
using D = std::vector<double>;

Tensor rows2x4() { return from_vector(D{1.0, 2.0, 4.0, -1.0, 0.5, 0.5, -0.5, 3.0}, {2, 4}); }
Tensor weight4() { return from_vector(D{1.0, 0.5, -2.0, 1.5}); }
Tensor bias4() { return from_vector(D{0.0, 0.1, 0.2, -0.3}); }

// (N=3, C=2, 2) and its per-channel parameters.
Tensor batch3x2x2() {
  return from_vector(D{1.0, 2.0, 0.5, -1.0, 3.0, -2.0, 0.0, 4.0, 0.5, 0.5, 1.0, 2.0}, {3, 2, 2});
}

TEST(Norm, LayerNormValues) {
  const Tensor x = rows2x4();
  EXPECT_TRUE(testing::allclose(layer_norm(x, {4}, weight4(), bias4()),
                                {-0.2773496714211404, 0.23867483571057038, -2.573496714211406,
                                 -2.380122535658554, -0.290020079365226, -0.045010039682612996,
                                 2.3268139153449905, 2.1651706746044206},
                                1e-12, 1e-10));
  EXPECT_TRUE(testing::allclose(layer_norm(x, {4}),
                                {-0.2773496714211404, 0.27734967142114075, 1.386748357105703,
                                 -1.3867483571057027, -0.290020079365226, -0.290020079365226,
                                 -1.0634069576724952, 1.6434471164029472},
                                1e-12, 1e-10));
  // Normalizing over two trailing dims.
  EXPECT_TRUE(testing::allclose(layer_norm(x.reshape({1, 2, 4}), {2, 4}),
                                {-0.11721947070479766, 0.5079510397207898, 1.7582920605719647,
                                 -1.3675604915559725, -0.4298047259175914, -0.4298047259175914,
                                 -1.0549752363431788, 1.1331215501463774},
                                1e-12, 1e-10));
  // float32 and bfloat16 inputs keep their dtype.
  const Tensor y32 = layer_norm(x.to(kFloat32), {4}, weight4().to(kFloat32), bias4().to(kFloat32));
  EXPECT_EQ(y32.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(y32, layer_norm(x, {4}, weight4(), bias4()).to_vector<double>(), 1e-5, 1e-5));
  const Tensor y16 = layer_norm(x.to(kBFloat16), {4});
  EXPECT_EQ(y16.dtype(), kBFloat16);
  EXPECT_TRUE(testing::allclose(y16, layer_norm(x, {4}).to_vector<double>(), 2e-2, 1e-2));
}

// PyTorch 2.x's autocast lists (Note [autocast lists]): the norms run in
// float32 under CUDA autocast (and on dtr's other non-CPU device types) and
// in their input's dtype under CPU autocast.
TEST(Norm, NormsFollowEachDeviceTypesAutocastList) {
  {
    AutocastGuard ac(kCPU, kBFloat16);
    EXPECT_EQ(layer_norm(rows2x4().to(kBFloat16), {4}).dtype(), kBFloat16);
    EXPECT_EQ(rms_norm(rows2x4().to(kBFloat16), {4}).dtype(), kBFloat16);
    EXPECT_EQ(group_norm(batch3x2x2().to(kBFloat16), 2).dtype(), kBFloat16);
    EXPECT_EQ(layer_norm(rows2x4().to(kFloat32), {4}).dtype(), kFloat32);
  }
  for (const char* name :
       {"layer_norm", "rms_norm", "group_norm", "batch_norm", "batch_norm_inference"}) {
    EXPECT_EQ(op(name).autocast_policy(kCPU), AutocastPolicy::kNone) << name;
    EXPECT_EQ(op(name).autocast_policy(kCUDA), AutocastPolicy::kFloat32) << name;
  }
}

// PyTorch's norm kernels take a bfloat16 (or float16) input with float32
// parameters, as a float32 model's norm layers meet it under CPU autocast:
// float32 inside, the input's dtype out (rms_norm: the normalized input
// times the weight, float32).
TEST(Norm, MixedTypeComputesInFloat32AndReturnsTheInputsDType) {
  const Tensor x32 = rows2x4().to(kFloat32), w = weight4().to(kFloat32), b = bias4().to(kFloat32);
  for (DType low : {kBFloat16, kFloat16}) {
    const Tensor x = x32.to(low);
    const Tensor y = layer_norm(x, {4}, w, b);
    EXPECT_EQ(y.dtype(), low);
    EXPECT_TRUE(testing::bitwise_equal(y, layer_norm(x.to(kFloat32), {4}, w, b).to(low)));
    EXPECT_EQ(layer_norm(x, {4}, w).dtype(), low);
    EXPECT_EQ(layer_norm(x, {4}, Tensor(), b).dtype(), low);

    const Tensor r = rms_norm(x, {4}, w);
    EXPECT_EQ(r.dtype(), kFloat32);
    EXPECT_TRUE(testing::bitwise_equal(r, mul(rms_norm(x, {4}), w)));

    const Tensor xb = batch3x2x2().to(low);
    const Tensor c32 = from_vector(std::vector<float>{1.5, -0.5});
    const Tensor z32 = from_vector(std::vector<float>{0.25, 1});
    Tensor rm = zeros({2}), rv = ones({2});
    const Tensor yb = batch_norm(xb, rm, rv, c32, z32, /*training=*/true, 0.1, 1e-5);
    EXPECT_EQ(yb.dtype(), low);
    Tensor rm_ref = zeros({2}), rv_ref = ones({2});
    EXPECT_TRUE(testing::bitwise_equal(
        yb, batch_norm(xb.to(kFloat32), rm_ref, rv_ref, c32, z32, true, 0.1, 1e-5).to(low)));
    EXPECT_TRUE(testing::bitwise_equal(rm, rm_ref));  // float32 running statistics
    EXPECT_TRUE(testing::bitwise_equal(rv, rv_ref));
    EXPECT_EQ(batch_norm(xb, rm, rv, c32, z32, /*training=*/false).dtype(), low);
    EXPECT_EQ(batch_norm(xb, rm, rv, Tensor(), Tensor(), /*training=*/false).dtype(), low);
    EXPECT_EQ(group_norm(xb, 2, c32, z32).dtype(), low);
  }
  // Gradients: the input's in its dtype, the parameters' in float32.
  const Tensor x = x32.to(kBFloat16).requires_grad_(true);
  const Tensor wg = w.detach().requires_grad_(true);
  sum(layer_norm(x, {4}, wg).to(kFloat32)).backward();
  EXPECT_EQ(x.grad().dtype(), kBFloat16);
  EXPECT_EQ(wg.grad().dtype(), kFloat32);
  // Anything else still needs parameters of x's dtype.
  EXPECT_THROW(layer_norm(x32.to(kBFloat16), {4}, w.to(kFloat64)), TypeError);
  EXPECT_THROW(layer_norm(x32.to(kBFloat16), {4}, w, b.to(kBFloat16)), TypeError);
}

TEST(Norm, RmsNormValues) {
  EXPECT_TRUE(testing::allclose(rms_norm(rows2x4(), {4}, weight4(), 1e-6),
                                {0.4264013939474596, 0.4264013939474596, -3.4112111515796766,
                                 -0.6396020909211894, 0.3202562419165929, 0.16012812095829645,
                                 0.6405124838331858, 2.8823061772493364},
                                1e-12, 1e-10));
  // The default eps is torch.finfo(dtype).eps: negligible here.
  const Tensor y = rms_norm(from_vector(D{3.0, 4.0}), {2});
  EXPECT_TRUE(testing::allclose(y, {3.0 / std::sqrt(12.5), 4.0 / std::sqrt(12.5)}, 1e-12, 1e-12));
}

TEST(Norm, BatchNormTrainingNormalizesAndUpdatesRunningStats) {
  const Tensor x = batch3x2x2();
  const Tensor rm = from_vector(D{0.5, -0.5}), rv = from_vector(D{1.0, 2.0});
  const Tensor w = from_vector(D{1.5, -0.5}), b = from_vector(D{0.25, 1.0});
  const Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  EXPECT_TRUE(testing::allclose(y,
                                {0.4117488212614674, 1.382241748830272, 1.1831980115300318,
                                 1.6542786126072564, 2.3527346763990766, -2.499729961444946,
                                 1.3402248785557733, 0.08400994234984127, -0.07349764252293489,
                                 -0.07349764252293489, 1.0261711445042903, 0.7121174104528073},
                                1e-12, 1e-10));
  // running_var takes the unbiased batch variance.
  EXPECT_TRUE(testing::allclose(rm, {0.5333333333333333, -0.3416666666666667}, 1e-12, 1e-10));
  EXPECT_TRUE(testing::allclose(rv, {1.1866666666666665, 2.104166666666667}, 1e-12, 1e-10));
  // Without running buffers (track_running_stats=False) it only normalizes.
  EXPECT_TRUE(testing::allclose(batch_norm(x, Tensor(), Tensor(), w, b, true), y.to_vector<double>()));
}

TEST(Norm, BatchNormEvalUsesRunningStats) {
  const Tensor x = batch3x2x2();
  const Tensor rm = from_vector(D{0.5, -0.5}), rv = from_vector(D{1.0, 2.0});
  const Tensor w = from_vector(D{1.5, -0.5}), b = from_vector(D{0.25, 1.0});
  const Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/false, 0.1, 1e-5);
  EXPECT_TRUE(testing::allclose(y,
                                {0.9999962500281248, 2.4999887500843743, 0.6464474932868882,
                                 1.176776253356556, 3.999981250140624, -3.499981250140624,
                                 0.8232237466434441, -0.5909862802090032, 0.25, 0.25,
                                 0.4696712399303323, 0.11611873321722044},
                                1e-12, 1e-10));
  EXPECT_TRUE(testing::allclose(rm, {0.5, -0.5}));
  EXPECT_TRUE(testing::allclose(rv, {1.0, 2.0}));
}

/// Sets a memory budget for a scope, then lifts it.
struct BudgetScope {
  explicit BudgetScope(int64_t bytes) { remat::set_memory_budget(bytes); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
};

TEST(Norm, BatchNormRunningStatsUpdateOncePerForwardEvenWhenReplayed) {
  // Note [replay equals original]: rematerializing the normalized output
  // replays only the pure op, never the running-statistics update.
  Tensor x = batch3x2x2();
  x.requires_grad_();
  const Tensor rm = from_vector(D{0.5, -0.5}), rv = from_vector(D{1.0, 2.0});
  const Tensor w = from_vector(D{1.5, -0.5}), b = from_vector(D{0.25, 1.0});
  const Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  const D y_before = y.to_vector<double>();  // host copy: not evictable
  const D rm1{0.5333333333333333, -0.3416666666666667}, rv1{1.1866666666666665, 2.104166666666667};

  const remat::Stats before = remat::stats();
  {
    BudgetScope tiny(1);  // evicts everything evictable, y among it
  }
  EXPECT_GT(remat::stats().evictions, before.evictions);
  EXPECT_EQ(y.to_vector<double>(), y_before);  // reading y replays batch_norm
  EXPECT_GT(remat::stats().rematerializations, before.rematerializations);
  EXPECT_TRUE(testing::allclose(rm, rm1, 1e-12, 1e-10));
  EXPECT_TRUE(testing::allclose(rv, rv1, 1e-12, 1e-10));

  // Backward after eviction works and still leaves the buffers alone.
  {
    BudgetScope tiny(1);
  }
  mse_loss(y, zeros_like(y)).backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_TRUE(testing::allclose(rm, rm1, 1e-12, 1e-10));

  // A second forward updates them exactly once more.
  batch_norm(x.detach(), rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  EXPECT_TRUE(testing::allclose(rm, {0.9 * rm1[0] + 0.1 * (5.0 / 6), 0.9 * rm1[1] + 0.1 * (6.5 / 6)}, 1e-12, 1e-10));
}

TEST(Norm, EvalOutputReplayedAfterTrainingUpdateSeesOldStats) {
  // Note [mutation]: the in-place update must not change what an evicted
  // eval-mode output's lineage reads.
  const Tensor x = batch3x2x2();
  const Tensor rm = from_vector(D{0.5, -0.5}), rv = from_vector(D{1.0, 2.0});
  const Tensor y_eval = batch_norm(x * 2.0, rm, rv, Tensor(), Tensor(), /*training=*/false);
  const D expected = y_eval.to_vector<double>();
  const remat::Stats before = remat::stats();
  {
    BudgetScope tiny(1);  // evicts y_eval, which the test still holds
  }
  ASSERT_FALSE(y_eval.storage()->resident());
  batch_norm(x, rm, rv, Tensor(), Tensor(), /*training=*/true);
  EXPECT_EQ(y_eval.to_vector<double>(), expected);
  EXPECT_GT(remat::stats().rematerializations, before.rematerializations);
}

TEST(Norm, BadArgumentsThrowTypedErrors) {
  const Tensor x = rows2x4();
  expect_error<ValueError>([&] { layer_norm(x, {3}); }, "layer_norm");
  expect_error<ValueError>([&] { layer_norm(x, {2, 4, 1}); }, "layer_norm");
  expect_error<ValueError>([&] { layer_norm(x, {4}, zeros({3}, kFloat64)); }, "layer_norm");
  expect_error<TypeError>([&] { layer_norm(x, {4}, zeros({4}, kFloat32)); }, "layer_norm");
  expect_error<TypeError>([&] { layer_norm(zeros({2, 4}, kInt64), {4}); }, "layer_norm");
  expect_error<ValueError>([&] { rms_norm(x, {5}); }, "rms_norm");
  expect_error<ValueError>([&] { rms_norm(x, {4}, zeros({2}, kFloat64)); }, "rms_norm");
  const Tensor c2 = zeros({2}, kFloat64);
  expect_error<ValueError>([&] { batch_norm(zeros({1, 2}, kFloat64), c2, c2, c2, c2, true); }, "batch_norm");
  expect_error<ValueError>([&] { batch_norm(zeros({4}, kFloat64), c2, c2, c2, c2, true); }, "batch_norm");
  expect_error<ValueError>([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); }, "batch_norm");
  expect_error<ValueError>([&] { batch_norm(x, c2, c2, zeros({3}, kFloat64), Tensor(), true); }, "batch_norm");
  expect_error<ValueError>([&] { batch_norm(x, zeros({3}, kFloat64), c2, Tensor(), Tensor(), false); }, "batch_norm");
  expect_error<TypeError>([&] { batch_norm(zeros({2, 2}, kInt64), c2, c2, c2, c2, true); }, "batch_norm");
  expect_error<ValueError>([&] { batch_norm(x, c2, Tensor(), Tensor(), Tensor(), true); }, "batch_norm");
}

TEST(Norm, Gradchecks) {
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return layer_norm(in[0], {4}, in[1], in[2]); },
                                 {testing::leaf({3, 4}, 1), testing::leaf({4}, 2), testing::leaf({4}, 3)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return layer_norm(in[0], {3, 4}); }, {testing::leaf({2, 3, 4}, 4)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return layer_norm(in[0], {5}, Tensor(), in[1]); },
                                 {testing::leaf({2, 5}, 5), testing::leaf({5}, 6)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return rms_norm(in[0], {5}, in[1]); },
                                 {testing::leaf({3, 5}, 7), testing::leaf({5}, 8)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return rms_norm(in[0], {2, 3}); }, {testing::leaf({2, 2, 3}, 9)}));
  EXPECT_TRUE(testing::gradcheck(
      [](const V& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
      {testing::leaf({4, 3, 2}, 10), testing::leaf({3}, 11), testing::leaf({3}, 12)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
                                 {testing::leaf({5, 3}, 13)}));
  const Tensor rm = from_vector(D{0.1, -0.2, 0.3}), rv = from_vector(D{0.5, 1.5, 2.0});
  EXPECT_TRUE(testing::gradcheck(
      [&](const V& in) { return batch_norm(in[0], rm, rv, in[1], in[2], false); },
      {testing::leaf({2, 3, 2, 2}, 14), testing::leaf({3}, 15), testing::leaf({3}, 16)}));
}


// Found by tests/fuzz/fuzz_dispatch: batch_norm_backward read the channel
// count x.shape[1] of a 1-D input (past the end of its shape).
TEST(BatchNormBackward, InputOfFewerThanTwoDimsIsAValueError) {
  const OpDef& row = op("batch_norm_backward");
  Attrs a;
  for (const ParamSpec& p : row.params) {
    if (p.type == ParamType::kBool) a.set(p.name, false);
    if (p.type == ParamType::kFloat) a.set(p.name, 0.1);
    if (p.type == ParamType::kInt) a.set(p.name, int64_t{0});
  }
  a.set("training", true);
  const Tensor x = ones({3});
  EXPECT_THAT(testing::error_message<ValueError>([&] { (void)dispatch1(row, {x, x}, a); }),
              ::testing::HasSubstr("expected an input of at least 2 dims (N, C, ...), got shape [3]"));
}

// The norm gradient rows by name with a norm_shape the input does not end
// with (found by the dispatch fuzzer: the kernel read before the shape).
TEST(NormBackwardRows, CheckTheirNormShape) {
  const Tensor x = ones({2, 3});
  for (const char* name : {"layer_norm_backward", "rms_norm_backward"}) {
    const Attrs a{{"norm_shape", Shape{4, 2, 3}}, {"eps", 1e-5}, {"has_weight", false},
                  {"has_bias", false}};
    EXPECT_THROW((void)dispatch1(op(name), {x, x}, a), ValueError) << name;
  }
}

}  // namespace
}  // namespace dtr
