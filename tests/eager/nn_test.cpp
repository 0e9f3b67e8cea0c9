// dtr::nn: Module registration and traversal, state_dict round trips and
// errors, initialization from the global seed, and each layer's forward
// against values from PyTorch 1.13 (tests/eager/nn_reference.py) plus
// float64 gradient checks of module forwards.
#include <cmath>
#include <memory>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using nn::Module;

// The deterministic values of nn_reference.py: ((i*a) % 13 - 6)/8 + 0.01 i.
Tensor vals(IntList shape, int64_t a, DType dtype = kFloat32) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((int64_t(i) * a) % 13 - 6) / 8.0 + 0.01 * double(i);
  return from_vector(v, shape, dtype);
}

std::vector<std::string> names(const nn::NamedTensors& nt) {
  std::vector<std::string> out;
  for (const auto& [n, t] : nt) out.push_back(n);
  return out;
}

bool message_has(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) {
      if (msg.find(p) == std::string::npos) {
        ADD_FAILURE() << "message lacks '" << p << "': " << msg;
        return false;
      }
    }
    return true;
  }
  ADD_FAILURE() << "no ValueError thrown";
  return false;
}

// PyTorch's Block from nn_reference.py: own parameter and buffer, then a Sequential.
struct Block : nn::UnaryModule {
  Tensor scale, count;
  nn::Sequential body{nullptr};
  Block() : nn::UnaryModule("Block") {
    scale = register_parameter("scale", ones({2}));
    count = register_buffer("count", zeros({1}));
    body = register_module("body", nn::Sequential(nn::Linear(2, 2), nn::BatchNorm2d(2),
                                       nn::Linear(2, 1, /*bias=*/false)));
  }
  Tensor forward(const Tensor& x) override { return x; }
};

TEST(NNModule, NamesAndOrderMatchPyTorch) {
  Block b;
  EXPECT_EQ(names(b.named_parameters()),
            (std::vector<std::string>{"scale", "body.0.weight", "body.0.bias", "body.1.weight",
                                      "body.1.bias", "body.2.weight"}));
  EXPECT_EQ(b.state_dict().keys(),
            (std::vector<std::string>{"scale", "count", "body.0.weight", "body.0.bias", "body.1.weight",
                                      "body.1.bias", "body.1.running_mean", "body.1.running_var",
                                      "body.1.num_batches_tracked", "body.2.weight"}));
  EXPECT_EQ(names(b.named_buffers()),
            (std::vector<std::string>{"count", "body.1.running_mean", "body.1.running_var",
                                      "body.1.num_batches_tracked"}));
  EXPECT_EQ(names(b.named_parameters(/*recurse=*/false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(b.parameters().size(), 6u);
  for (const Tensor& p : b.parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  for (const Tensor& t : b.buffers()) EXPECT_FALSE(t.requires_grad());
  EXPECT_EQ(b.state_dict().at("body.1.num_batches_tracked").dtype(), kInt64);
  // The parameter handle and the registry share the tensor.
  EXPECT_EQ(b.named_parameters()[0].second.impl(), b.scale.impl());
  EXPECT_EQ(b.state_dict().at("scale").storage(), b.scale.storage());
}

TEST(NNModule, RegistrationErrors) {
  Block b;
  EXPECT_THROW(b.register_parameter("scale", ones({1})), ValueError);
  EXPECT_THROW(b.register_buffer("body", ones({1})), ValueError);
  EXPECT_THROW(b.register_parameter("a.b", ones({1})), ValueError);
  EXPECT_THROW(b.register_parameter("", ones({1})), ValueError);
  EXPECT_THROW(b.register_parameter("idx", arange(3)), TypeError);
  Tensor x = ones({2});
  x.requires_grad_();
  Tensor nonleaf = x * 2.0;
  EXPECT_THROW(b.register_parameter("nonleaf", nonleaf), ValueError);
  EXPECT_THROW(b.register_module("body", nn::ReLU()), ValueError);
  // An undefined parameter (bias=None) registers nothing.
  EXPECT_FALSE(b.register_parameter("none", Tensor()).defined());
  EXPECT_EQ(b.named_parameters().size(), 6u);
}

TEST(NNModule, TrainEvalAndZeroGrad) {
  Block b;
  EXPECT_TRUE(b.is_training());
  b.eval();
  EXPECT_FALSE(b.is_training());
  EXPECT_FALSE((*b.body)[1]->is_training());
  b.train();
  EXPECT_TRUE((*b.body)[2]->is_training());
  EXPECT_THROW((*b.body)[3], IndexError);

  nn::Linear lin(3, 2);
  Tensor loss = sum(lin->forward(vals({4, 3}, 3)));
  loss.backward();
  ASSERT_TRUE(lin->weight.grad().defined());
  // d sum(xW^T+b)/db = batch size.
  EXPECT_TRUE(testing::allclose(lin->bias.grad(), {4, 4}));
  lin->zero_grad();
  EXPECT_FALSE(lin->weight.grad().defined());
  EXPECT_FALSE(lin->bias.grad().defined());
}

TEST(NNModule, StateDictRoundTripAndErrors) {
  manual_seed(1);
  Block a;
  manual_seed(2);
  Block b;
  EXPECT_FALSE(testing::bitwise_equal(a.body->named_parameters()[0].second, b.body->named_parameters()[0].second));
  b.load_state_dict(a.state_dict());
  for (const auto& [name, t] : a.state_dict()) {
    EXPECT_TRUE(testing::bitwise_equal(t, b.state_dict().at(name))) << name;
    EXPECT_NE(t.storage(), b.state_dict().at(name).storage()) << name;  // copied, not aliased
  }
  // Loading copies in place: the member handles see the new values.
  EXPECT_TRUE(testing::bitwise_equal(b.scale, a.scale));
  EXPECT_TRUE(b.scale.requires_grad());
  // Loading a module's own state is a no-op.
  b.load_state_dict(b.state_dict());

  StateDict missing = a.state_dict();
  missing.erase("body.0.bias");
  missing.erase("count");
  EXPECT_TRUE(message_has([&] { b.load_state_dict(missing); },
                          {"Missing key(s)", "\"count\"", "\"body.0.bias\"", "Block"}));
  StateDict extra = a.state_dict();
  extra.insert("body.7.weight", ones({1}));
  EXPECT_TRUE(message_has([&] { b.load_state_dict(extra); }, {"Unexpected key(s)", "body.7.weight"}));
  StateDict shape = a.state_dict();
  shape.insert("scale", ones({3}));
  EXPECT_TRUE(message_has([&] { b.load_state_dict(shape); }, {"size mismatch for scale", "[3]", "[2]"}));

  // Non-strict: missing and unexpected keys are ignored, the rest is loaded.
  StateDict partial;
  partial.insert("scale", full({2}, 5.0));
  partial.insert("unknown", ones({1}));
  b.load_state_dict(partial, /*strict=*/false);
  EXPECT_TRUE(testing::allclose(b.scale, {5, 5}));
  // A shape mismatch throws even when not strict, and nothing is written.
  StateDict bad;
  bad.insert("scale", full({2}, 7.0));
  bad.insert("count", ones({4}));
  EXPECT_THROW(b.load_state_dict(bad, false), ValueError);
  EXPECT_TRUE(testing::allclose(b.scale, {5, 5}));
}

TEST(NNInit, LinearIsKaimingUniformFromTheGlobalSeed) {
  manual_seed(11);
  nn::Linear lin(3, 2);
  manual_seed(11);
  const auto w = rand({2, 3}, kFloat64).to_vector<double>();
  const auto b = rand({2}, kFloat64).to_vector<double>();
  const double bound = 1.0 / std::sqrt(3.0);  // gain sqrt(1/3) * sqrt(3/fan_in)
  std::vector<double> ew, eb;
  for (double u : w) ew.push_back(-bound + 2 * bound * u);
  for (double u : b) eb.push_back(-bound + 2 * bound * u);
  EXPECT_TRUE(testing::allclose(lin->weight, ew, 1e-7, 1e-6));
  EXPECT_TRUE(testing::allclose(lin->bias, eb, 1e-7, 1e-6));
  EXPECT_EQ(lin->weight.dtype(), kFloat32);

  // Same seed, same model; float64 modules start from the same values.
  manual_seed(11);
  nn::Linear again(3, 2, true, kFloat64);
  EXPECT_EQ(again->weight.dtype(), kFloat64);
  EXPECT_TRUE(testing::allclose(again->weight, ew, 1e-15, 1e-15));

  manual_seed(5);
  nn::Conv2d conv(nn::Conv2dOptions(4, 6, {3, 2}));
  const double cbound = 1.0 / std::sqrt(4.0 * 3 * 2);
  EXPECT_EQ(conv->weight.shape(), (Shape{6, 4, 3, 2}));
  double lo = 1, hi = -1;
  for (double v : conv->weight.to_vector<double>()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -cbound);
  EXPECT_LE(hi, cbound);
  EXPECT_LT(lo, -0.8 * cbound);  // 144 draws fill the range
  EXPECT_GT(hi, 0.8 * cbound);

  nn::Embedding emb(100, 20);
  const auto e = emb->weight.to_vector<double>();
  double mean = 0, sq = 0;
  for (double v : e) mean += v / double(e.size());
  for (double v : e) sq += (v - mean) * (v - mean) / double(e.size());
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(std::sqrt(sq), 1.0, 0.1);
}

TEST(NNLayers, LinearMatchesPyTorch) {
  nn::Linear lin(3, 2);
  lin->load_state_dict({{"weight", vals({2, 3}, 7)}, {"bias", vals({2}, 5)}});
  EXPECT_TRUE(testing::allclose(lin->forward(vals({2, 3}, 3)),
                                {-0.2488749623298645, -0.1486000120639801, -0.6748499870300293, -0.5562500357627869},
                                1e-6));
  nn::Linear nobias(3, 2, false);
  EXPECT_EQ(nobias->state_dict().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_THROW(lin->forward(ones({2, 4})), ValueError);
}

TEST(NNLayers, Conv2dMatchesPyTorch) {
  nn::Conv2d conv(2, 3, 3, /*stride=*/2, /*padding=*/1);
  conv->load_state_dict({{"weight", vals({3, 2, 3, 3}, 5)}, {"bias", vals({3}, 3)}});
  Tensor y = conv->forward(vals({1, 2, 5, 5}, 7));
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 3}));
  EXPECT_TRUE(testing::allclose(
      y,
      {-0.2972249984741211, -0.005700051784515381, -0.5605750679969788, -1.8830498456954956,
       -3.2634496688842773, -0.37622496485710144, 0.006824970245361328, 0.23160004615783691,
       -0.2638499140739441,  0.4797249436378479,   1.0714999437332153,  0.7833249568939209,
       0.24499988555908203,  -1.3140249252319336,  -0.7290000319480896, 0.6203998923301697,
       1.8721749782562256,   1.8185498714447021,   0.33855000138282776, 1.2305749654769897,
       1.2497249841690063,   1.4549251794815063,   0.22915001213550568, -0.22052502632141113,
       1.1121000051498413,   2.488999843597412,    2.4059500694274902},
      1e-5));
  nn::Conv2d grouped(4, 6, 1, 1, 0, 1, /*groups=*/2);
  EXPECT_EQ(grouped->weight.shape(), (Shape{6, 2, 1, 1}));
  EXPECT_THROW(nn::Conv2d(3, 6, 1, 1, 0, 1, 2), ValueError);
  EXPECT_THROW(nn::Conv2d(2, 2, 0), ValueError);
}

TEST(NNLayers, BatchNorm2dTrainingUpdatesRunningStatsOncePerForward) {
  nn::BatchNorm2d bn(3);
  bn->load_state_dict({{"weight", add(vals({3}, 4), 1.0)},
                      {"bias", vals({3}, 2)},
                      {"running_mean", zeros({3})},
                      {"running_var", ones({3})},
                      {"num_batches_tracked", zeros({}, kInt64)}});
  const Tensor x1 = vals({2, 3, 2, 2}, 5);
  const Tensor x2 = add(mul(vals({2, 3, 2, 2}, 11), 2.0), 0.5);
  Tensor y1 = bn->forward(x1);
  EXPECT_TRUE(testing::allclose(
      y1,
      {-1.1007786989212036, -0.7825722694396973, -0.4643658697605133, -0.9604672193527222,
       -0.651790201663971,  0.4818570613861084,  -1.2855615615844727, -0.15191428363323212,
       -2.011955976486206,  -0.3954673409461975, 1.2210211753845215,  -1.2991734743118286,
       -0.5395327210426331, -1.0356340408325195, -0.717427670955658,  -0.399221271276474,
       -1.5533522367477417, -0.41970497369766235, 0.713942289352417,  -1.0534762144088745,
       0.839173436164856,   -1.6810212135314941, -0.06453271210193634, 1.5519558191299438},
      1e-5));
  bn->forward(x2);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  EXPECT_TRUE(testing::allclose(bn->running_mean, {0.06362500041723251, 0.06163124740123749, 0.1449500173330307}, 1e-6));
  EXPECT_TRUE(testing::allclose(bn->running_var, {0.9767261147499084, 0.9080161452293396, 0.8841592073440552}, 1e-6));
  // Evaluation mode: running statistics, no update.
  bn->eval();
  Tensor ye = bn->forward(x1);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  EXPECT_TRUE(testing::allclose(
      ye,
      {-0.9558143615722656, -0.7951849102973938, -0.6345555186271667, -0.884985625743866,
       -0.40755704045295715, 0.09889474511146545, -0.6906915307044983, -0.1842397302389145,
       -1.1618664264678955, -0.30421707034111023, 0.553432285785675,  -0.783690333366394,
       -0.6724994778633118, -0.922929584980011,  -0.7623001933097839, -0.6016707420349121,
       -0.8103258013725281, -0.30387401580810547, 0.20257778465747833, -0.5870084762573242,
       0.3508378863334656,  -0.986284613609314,  -0.12863533198833466, 0.7290140390396118},
      1e-5));
  EXPECT_TRUE(testing::allclose(bn->running_mean, {0.06362500041723251, 0.06163124740123749, 0.1449500173330307}, 1e-6));

  // momentum=None: cumulative moving average.
  nn::BatchNorm2d cma(3, 1e-5, std::nullopt);
  cma->forward(x1);
  cma->forward(x2);
  EXPECT_TRUE(testing::allclose(cma->running_mean, {0.31562498211860657, 0.32093751430511475, 0.7325000166893005}, 1e-6));
  EXPECT_TRUE(testing::allclose(cma->running_var, {0.8478526473045349, 0.5004363059997559, 0.38501787185668945}, 1e-6));

  // track_running_stats=false: no buffers, batch statistics in both modes.
  nn::BatchNorm2d plain(3, 1e-5, 0.1, /*affine=*/true, /*track_running_stats=*/false);
  plain->load_state_dict({{"weight", add(vals({3}, 4), 1.0)}, {"bias", vals({3}, 2)}});
  EXPECT_EQ(plain->state_dict().keys(), (std::vector<std::string>{"weight", "bias"}));
  plain->eval();
  EXPECT_TRUE(testing::allclose(plain->forward(x1), y1.to_vector<double>(), 1e-6));

  EXPECT_THROW(bn->forward(ones({2, 3})), ValueError);
  EXPECT_THROW(bn->forward(ones({2, 4, 2, 2})), ValueError);
}

TEST(NNLayers, LayerNormEmbeddingDropoutActivations) {
  nn::LayerNorm ln(nn::LayerNormOptions({4}));
  ln->load_state_dict({{"weight", add(vals({4}, 3), 1.0)}, {"bias", vals({4}, 5)}});
  EXPECT_TRUE(testing::allclose(ln->forward(vals({2, 4}, 5)),
                                {-1.0377378463745117, 0.0037428901996463537, 2.0754432678222656,
                                 -1.2581908702850342, -0.8462168574333191, 0.7490960955619812,
                                 -0.8679970502853394, 0.07073868811130524},
                                1e-5));
  nn::Embedding emb(5, 3);
  emb->load_state_dict({{"weight", vals({5, 3}, 7)}});
  Tensor idx = from_vector(std::vector<int64_t>{0, 4, 2, 2}, {2, 2});
  Tensor e = emb->forward(idx);
  EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(testing::allclose(e, {-0.75, 0.135, -0.605, 0.12, -0.62, 0.265, -0.315, 0.57, -0.17,
                                    -0.315, 0.57, -0.17},
                                1e-6));
  EXPECT_THROW(emb->forward(from_vector(std::vector<int64_t>{5})), IndexError);

  nn::Dropout drop(0.5);
  Tensor x = ones({1000});
  manual_seed(3);
  const auto kept = drop->forward(x).to_vector<double>();
  int zeros_seen = 0;
  for (double v : kept) {
    EXPECT_TRUE(v == 0.0 || v == 2.0) << v;
    zeros_seen += v == 0.0;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  drop->eval();
  EXPECT_TRUE(testing::bitwise_equal(drop->forward(x), x));
  EXPECT_THROW(nn::Dropout(1.5), ValueError);

  Tensor v = from_vector(std::vector<float>{-1.0f, 0.5f, 2.0f});
  EXPECT_TRUE(testing::allclose(nn::ReLU()->forward(v), {0, 0.5, 2}));
  // torch.nn.GELU()(torch.tensor([-1., .5, 2.])) and approximate='tanh'.
  EXPECT_TRUE(testing::allclose(nn::GELU()->forward(v), {-0.1586552858352661, 0.3457311987876892, 1.9544999599456787}, 1e-6));
  EXPECT_TRUE(testing::allclose(nn::GELU("tanh")->forward(v), {-0.15880799293518066, 0.3457140028476715, 1.9545977115631104}, 1e-6));
  EXPECT_THROW(nn::GELU("fast"), ValueError);
}

TEST(NNLayers, RMSNormHardtanhReLU6) {
  // nn_reference.py: rms, rms_no_affine (torch.nn.RMSNorm's formula), hardtanh, relu6.
  nn::RMSNorm rms(nn::RMSNormOptions({4}).eps(1e-6));
  EXPECT_EQ(rms->state_dict().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_TRUE(testing::allclose(rms->weight, {1, 1, 1, 1}));
  rms->load_state_dict({{"weight", add(vals({4}, 3), 1.0)}});
  EXPECT_TRUE(testing::allclose(rms->forward(vals({2, 4}, 5)),
                                {-0.3630305528640747, -0.14138829708099365, 1.0269408226013184,
                                 -1.2785451412200928, 0.08689729124307632, 1.0701532363891602,
                                 -0.4082592725753784, 1.3170995712280273},
                                1e-5));
  nn::RMSNorm plain(nn::RMSNormOptions({4}).elementwise_affine(false));
  EXPECT_TRUE(plain->state_dict().keys().empty());
  EXPECT_FALSE(plain->weight.defined());
  EXPECT_TRUE(testing::allclose(plain->forward(vals({2, 4}, 5)),
                                {-1.4521245956420898, -0.22265909612178802, 1.0068062543869019,
                                 -0.9099980592727661, 0.3475898504257202, 1.6852840185165405,
                                 -0.4002549648284912, 0.9374392628669739},
                                1e-5));
  EXPECT_THROW(rms->forward(ones({2, 3})), ValueError);

  EXPECT_TRUE(testing::allclose(nn::Hardtanh(-0.5, 0.25)->forward(mul(vals({6}, 5), 4.0)),
                                {-0.5, -0.46000000834465027, 0.25, -0.5, 0.25, 0.25}, 1e-6));
  EXPECT_TRUE(testing::allclose(nn::Hardtanh()->forward(vals({6}, 5)), {-0.75, -0.115, 0.52, -0.47, 0.165, 0.8}, 1e-6));
  EXPECT_TRUE(testing::allclose(nn::ReLU6()->forward(mul(vals({6}, 5), 10.0)),
                                {0.0, 0.0, 5.199999809265137, 0.0, 1.6500000953674316, 6.0}, 1e-6));
  EXPECT_EQ(nn::ReLU6()->name(), "ReLU6");
  EXPECT_EQ(nn::Hardtanh()->name(), "Hardtanh");
  EXPECT_THROW(nn::Hardtanh(1.0, -1.0), ValueError);
}

TEST(NNLayers, CausalSelfAttentionMatchesPyTorch) {
  nn::CausalSelfAttention attn(4, 2);
  EXPECT_EQ(attn->state_dict().keys(),
            (std::vector<std::string>{"c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"}));
  attn->load_state_dict({{"c_attn.weight", vals({12, 4}, 5)},
                        {"c_attn.bias", vals({12}, 3)},
                        {"c_proj.weight", vals({4, 4}, 7)},
                        {"c_proj.bias", vals({4}, 11)}});
  Tensor x = vals({1, 3, 4}, 3);
  Tensor y = attn->forward(x);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4}));
  EXPECT_TRUE(testing::allclose(
      y,
      {-1.2740905284881592, -0.5026435852050781, -1.3561965227127075, 1.3355129957199097,
       -0.9477710723876953, 0.5277002453804016, 0.3781716823577881, 0.2337917685508728,
       -0.8631614446640015, 0.6808817386627197, 0.5999249219894409, 0.06560660898685455},
      1e-5));
  // Causality: changing the last position leaves the earlier outputs alone.
  std::vector<double> xv = x.to_vector<double>();
  for (size_t i = 8; i < 12; ++i) xv[i] += 1.0;
  Tensor y2 = attn->forward(from_vector(xv, {1, 3, 4}, kFloat32));
  const auto a = y.to_vector<float>(), b = y2.to_vector<float>();
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(a[i], b[i]) << i;
  EXPECT_NE(a[8], b[8]);
  EXPECT_THROW(attn->forward(ones({1, 3, 5})), ValueError);
  EXPECT_THROW(nn::CausalSelfAttention(6, 4), ValueError);
}

TEST(NNLayers, SequentialComposes) {
  manual_seed(4);
  auto l1 = nn::Linear(3, 5);
  auto l2 = nn::Linear(5, 2);
  nn::Sequential seq{l1, nn::GELU(), l2};
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(seq->state_dict().keys(), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor x = vals({4, 3}, 3);
  EXPECT_TRUE(testing::bitwise_equal(seq->forward(x), l2->forward(gelu(l1->forward(x)))));
  EXPECT_TRUE(testing::bitwise_equal(seq(x), seq->forward(x)));
}

// Gradient checks of module forwards in float64: the module's parameters are
// swapped for the checker's perturbed inputs.
TEST(NNGradcheck, LinearForward) {
  nn::Linear lin(3, 2, true, kFloat64);
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& in) {
        lin->weight = in[1];
        lin->bias = in[2];
        return lin->forward(in[0]);
      },
      {testing::leaf({4, 3}, 1), testing::leaf({2, 3}, 2), testing::leaf({2}, 3)}));
}

TEST(NNGradcheck, Conv2dForward) {
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, {3, 2}).stride({2, 1}).padding({1, 0}), kFloat64);
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& in) {
        conv->weight = in[1];
        conv->bias = in[2];
        return conv->forward(in[0]);
      },
      {testing::leaf({2, 2, 5, 4}, 4), testing::leaf({3, 2, 3, 2}, 5), testing::leaf({3}, 6)}));
}

TEST(NNGradcheck, LayerNormAndAttentionForward) {
  nn::LayerNorm ln(nn::LayerNormOptions({3}), kFloat64);
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& in) {
        ln->weight = in[1];
        ln->bias = in[2];
        return ln->forward(in[0]);
      },
      {testing::leaf({2, 3}, 7), testing::leaf({3}, 8), testing::leaf({3}, 9)}));
  manual_seed(1);
  nn::CausalSelfAttention attn(4, 2, 0.0, true, kFloat64);
  EXPECT_TRUE(testing::gradcheck([&](const std::vector<Tensor>& in) { return attn->forward(in[0]); },
                                 {testing::leaf({2, 3, 4}, 10)}));
}

TEST(NNGradcheck, BatchNorm2dTrainingForward) {
  nn::BatchNorm2d bn(2, 1e-5, 0.1, true, true, kFloat64);
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& in) {
        bn->weight = in[1];
        bn->bias = in[2];
        return bn->forward(in[0]);
      },
      {testing::leaf({3, 2, 2, 2}, 11), testing::leaf({2}, 12), testing::leaf({2}, 13)}));
}

}  // namespace
}  // namespace dtr
