// Code written as a libtorch user writes it compiles and means what it means
// in libtorch: optimizer options with chained setters, parameters() without
// tied duplicates, Sequential/ModuleList of module values, single-int dims,
// operators, Tensor methods, Module::to(dtype), the small layers, gradient
// clipping and learning-rate schedulers. Each is checked against the long
// form or against values from PyTorch 1.13.
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <tuple>
#include <vector>

#include "dtr/dtr.h"
#include "tests/second_device.h"
#include "tests/testing.h"

namespace dtr {
namespace {

Tensor vals(IntList shape, double scale = 1.0, DType dtype = kFloat32) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * (double((int64_t(i) * 7) % 11) - 5.0) / 4.0;
  return from_vector(v, shape, dtype);
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         a.to_vector<double>() == b.to_vector<double>();
}

// ---- 1. optimizer options ---------------------------------------------------------

TEST(LibtorchHabits, OptimizerOptionsChainAndRead) {
  auto o = optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4);
  EXPECT_DOUBLE_EQ(o.lr(), 0.01);
  EXPECT_DOUBLE_EQ(o.momentum(), 0.9);
  EXPECT_DOUBLE_EQ(o.weight_decay(), 1e-4);
  EXPECT_DOUBLE_EQ(o.dampening(), 0.0);
  EXPECT_FALSE(o.nesterov());
  o.lr() = 0.5;  // the mutable getter, as libtorch's
  EXPECT_DOUBLE_EQ(o.lr(), 0.5);

  auto a = optim::AdamWOptions(3e-4).betas(std::make_tuple(0.9, 0.95)).weight_decay(0.1);
  EXPECT_DOUBLE_EQ(a.lr(), 3e-4);
  EXPECT_DOUBLE_EQ(std::get<0>(a.betas()), 0.9);
  EXPECT_DOUBLE_EQ(std::get<1>(a.betas()), 0.95);
  EXPECT_DOUBLE_EQ(a.weight_decay(), 0.1);
  EXPECT_DOUBLE_EQ(a.eps(), 1e-8);
  EXPECT_FALSE(a.zero_redundancy());
  EXPECT_EQ(a.process_group(), nullptr);
  EXPECT_DOUBLE_EQ(std::get<1>(optim::AdamWOptions().betas()), 0.999);
  EXPECT_DOUBLE_EQ(std::get<1>(optim::AdamWOptions().betas({0.8, 0.85}).betas()), 0.85);
  EXPECT_DOUBLE_EQ(optim::AdamWOptions().weight_decay(), 1e-2);
}

TEST(LibtorchHabits, SgdFromALearningRateStepsAsTheLongForm) {
  manual_seed(3);
  nn::Linear a(3, 2);
  manual_seed(3);
  nn::Linear b(3, 2);
  optim::SGD short_form(a->parameters(), 0.01);
  optim::SGD long_form(b->parameters(), optim::SGDOptions(0.01).momentum(0.0));
  EXPECT_DOUBLE_EQ(short_form.options().lr(), 0.01);
  const Tensor x = vals({4, 3});
  for (int i = 0; i < 2; ++i) {
    short_form.zero_grad();
    long_form.zero_grad();
    a->forward(x).sum().backward();
    b->forward(x).sum().backward();
    short_form.step();
    long_form.step();
  }
  EXPECT_TRUE(testing::bitwise_equal(a->weight, b->weight));
  EXPECT_TRUE(testing::bitwise_equal(a->bias, b->bias));
  // The weight moved by 2 · 0.01 · (sum of x over the batch) per output row.
  const std::vector<double> xs = x.sum(0).to_vector<double>();
  const std::vector<double> w0 = b->weight.to_vector<double>();
  manual_seed(3);
  nn::Linear fresh(3, 2);
  const std::vector<double> w_init = fresh->weight.to_vector<double>();
  for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(w0[j], w_init[j] - 0.02 * xs[j], 1e-6);
}

TEST(LibtorchHabits, AdamWBetasAreTheStateDictBetas) {
  manual_seed(1);
  nn::Linear l(2, 2);
  optim::AdamW opt(l->parameters(), optim::AdamWOptions(1e-3).betas(std::make_tuple(0.8, 0.9)));
  const StateDict s = opt.state_dict();
  EXPECT_DOUBLE_EQ(s.at("param_groups.0.beta1").item<double>(), 0.8);
  EXPECT_DOUBLE_EQ(s.at("param_groups.0.beta2").item<double>(), 0.9);
  EXPECT_THROW(optim::AdamW(l->parameters(), optim::AdamWOptions().betas(std::make_tuple(0.9, 1.0))),
               ValueError);
}

// ---- 2. parameters() of tied weights ------------------------------------------------

struct Tied : nn::UnaryModule {
  nn::Embedding wte{nullptr};
  nn::Linear head{nullptr};
  Tied() : nn::UnaryModule("Tied") {
    wte = register_module("wte", nn::Embedding(5, 3));
    head = register_module("head", nn::Linear(3, 5, false));
    head->weight = wte->weight;
    // Re-register the tied tensor under the head's name, as `head.weight = wte.weight`.
    tied = head->register_parameter("tied_weight", wte->weight);
  }
  Tensor forward(const Tensor& idx) override { return dtr::linear(wte->forward(idx), tied); }
  Tensor tied;
};

TEST(LibtorchHabits, ParametersOfTiedWeightsAppearOnce) {
  manual_seed(2);
  Tied m;
  const auto named = m.named_parameters();
  ASSERT_EQ(named.size(), 2u);  // wte.weight, head.weight (tied_weight is wte.weight)
  EXPECT_EQ(named[0].first, "wte.weight");
  EXPECT_EQ(named[1].first, "head.weight");
  EXPECT_EQ(m.named_parameters(true, false).size(), 3u);
  EXPECT_EQ(m.state_dict().size(), 3u);  // state_dict keeps every name, as PyTorch
  // AdamW takes parameters() directly; a hand-made list with a duplicate still throws.
  optim::AdamW opt(m.parameters(), optim::AdamWOptions(0.1));
  const Tensor idx = from_vector<int64_t>({0, 3});
  m.forward(idx).sum().backward();
  const Tensor before = m.wte->weight.detach().clone();
  opt.step();
  EXPECT_FALSE(same_values(before, m.wte->weight.detach()));
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{m.wte->weight, m.tied}, 0.1), ValueError);
}

// ---- 3. Sequential and ModuleList of module values ----------------------------------

TEST(LibtorchHabits, SequentialOfHolders) {
  manual_seed(4);
  // (C++ leaves the order in which the arguments are built, so which layer
  // draws its initial values first, to the compiler, as in libtorch.)
  nn::Sequential seq(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 1));
  ASSERT_EQ(seq->size(), 3u);
  auto l1 = std::dynamic_pointer_cast<nn::LinearImpl>(seq[0]);
  auto l2 = std::dynamic_pointer_cast<nn::LinearImpl>(seq[2]);
  ASSERT_NE(l1, nullptr);
  ASSERT_NE(l2, nullptr);
  EXPECT_EQ(l1->options.out_features(), 16);
  EXPECT_EQ(seq[1]->name(), "ReLU");
  nn::Sequential ref(l1, nn::ReLU(), l2);
  const Tensor x = vals({2, 8});
  EXPECT_TRUE(testing::bitwise_equal(seq->forward(x), l2->forward(relu(l1->forward(x)))));
  EXPECT_TRUE(testing::bitwise_equal(seq(x), ref->forward(x)));
  const auto names = seq->named_parameters();
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0].first, "0.weight");
  EXPECT_EQ(names[3].first, "2.bias");

  seq->push_back(nn::Linear(1, 1));                  // a holder
  seq->push_back(std::make_shared<nn::TanhImpl>());  // a shared_ptr
  auto shared = nn::Linear(1, 1);
  seq->push_back(shared);
  ASSERT_EQ(seq->size(), 6u);
  EXPECT_EQ(seq[5].get(), shared.get());
  EXPECT_EQ(seq->named_parameters().back().first, "5.bias");
  size_t n = 0;
  for (const auto& layer : *seq) n += layer.ptr() != nullptr;
  EXPECT_EQ(n, 6u);

  auto ptr = nn::Sequential(nn::Linear(2, 2), nn::SiLU());
  EXPECT_EQ(ptr->size(), 2u);
}

TEST(LibtorchHabits, HoldersAreValuesSharingTheirModule) {
  manual_seed(5);
  nn::Linear a(3, 2);
  const Tensor w = a->weight;
  std::vector<nn::Linear> layers;
  layers.push_back(std::move(a));
  layers.emplace_back(2, 2);
  EXPECT_EQ(layers[0]->weight.impl(), w.impl());
  ASSERT_EQ(layers[0]->parameters().size(), 2u);
  EXPECT_EQ(layers[0]->parameters()[0].impl(), w.impl());
  const Tensor y = layers[1](layers[0](vals({1, 3})));
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
}

TEST(LibtorchHabits, ModuleListNamesAndIndexes) {
  manual_seed(6);
  struct Net : nn::Module {
    nn::ModuleList blocks{nullptr};
    Net() : nn::Module("Net") {
      blocks = register_module("blocks", nn::ModuleList(nn::Linear(2, 3), nn::ReLU()));
      blocks->push_back(nn::Linear(3, 1));
      blocks->push_back(nn::Sigmoid());
    }
  } net;
  ASSERT_EQ(net.blocks->size(), 4u);
  const auto names = net.named_parameters();
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0].first, "blocks.0.weight");
  EXPECT_EQ(names[2].first, "blocks.2.weight");
  Tensor h = vals({5, 2});
  for (const auto& m : *net.blocks) h = std::dynamic_pointer_cast<nn::UnaryModule>(m)->forward(h);
  auto l0 = net.blocks->ptr<nn::LinearImpl>(0);
  auto l2 = net.blocks->ptr<nn::LinearImpl>(2);
  const Tensor ref = sigmoid(l2->forward(relu(l0->forward(vals({5, 2})))));
  EXPECT_TRUE(testing::bitwise_equal(h, ref));
  EXPECT_EQ((*net.blocks)[1]->name(), "ReLU");
  EXPECT_THROW((*net.blocks)[4], IndexError);
  EXPECT_THROW(net.blocks->ptr<nn::LinearImpl>(1), TypeError);
}

// ---- 4. single-int dims and sizes -------------------------------------------------------

TEST(LibtorchHabits, SingleIntDimsAreOneElementLists) {
  const Tensor x = vals({2, 3, 4, 4});
  EXPECT_TRUE(same_values(x.sum(1, true), x.sum({1}, true)));
  EXPECT_TRUE(same_values(x.mean(-1), x.mean({-1})));
  EXPECT_TRUE(same_values(sum(x, 1), sum(x, {1})));
  EXPECT_TRUE(same_values(mean(x, 2, true), mean(x, {2}, true)));
  EXPECT_TRUE(same_values(x.var(1), x.var({1})));
  EXPECT_TRUE(same_values(max_pool2d(x, 2), max_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_TRUE(same_values(avg_pool2d(x, 2), avg_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_TRUE(same_values(avg_pool2d(x, 2, 1), avg_pool2d(x, {2, 2}, {1, 1})));
  EXPECT_EQ(x.view({-1}).shape(), (Shape{96}));
  EXPECT_EQ(x.view(-1).shape(), (Shape{96}));
  EXPECT_EQ(x.reshape(-1).shape(), (Shape{96}));
  EXPECT_EQ(zeros(3).shape(), (Shape{3}));
  const int64_t d = 2;
  EXPECT_TRUE(same_values(x.sum(d), x.sum({2})));
  EXPECT_EQ(x.sum(1, true).shape(), (Shape{2, 1, 4, 4}));
}

// ---- 5. operators ----------------------------------------------------------------------

TEST(LibtorchHabits, CompoundAssignmentIsInPlace) {
  Tensor a = vals({2, 3});
  const Tensor b = vals({2, 3}, 0.5);
  const Tensor alias = a;  // a handle on the same tensor sees the writes
  const Tensor expected = div(mul(sub(add(a, b), 1.0), b), 4.0);
  a += b;
  a -= 1;
  a *= b;
  a /= 4;
  EXPECT_TRUE(same_values(alias, expected));
  EXPECT_EQ(alias.impl(), a.impl());
  Tensor c = vals({3});
  c += 2.5;
  c -= vals({3});
  c *= 2;
  c /= vals({3}, 0.0) + 4;
  EXPECT_TRUE(testing::allclose(c, {1.25, 1.25, 1.25}));
}

TEST(LibtorchHabits, ComparisonOperatorsAreElementwise) {
  const Tensor a = from_vector<float>({1, 2, 3, 4});
  const Tensor b = from_vector<float>({4, 2, 1, 4});
  EXPECT_EQ((a == b).dtype(), kBool);
  EXPECT_EQ((a == b).to_vector<bool>(), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ((a != b).to_vector<bool>(), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ((a < b).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ((a <= b).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ((a > b).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ((a >= b).to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ((a == 2).to_vector<bool>(), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ((a != 2).to_vector<bool>(), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ((a < 2.5).to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ((a <= 2).to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ((a > 3).to_vector<bool>(), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ((a >= 3).to_vector<bool>(), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ((2 < a).to_vector<bool>(), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ((2 >= a).to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ((3 == a).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ((a == b).sum().item<int64_t>(), 2);
}

TEST(LibtorchHabits, IndexingSelectsAlongTheFirstDim) {
  const Tensor x = vals({3, 4});
  EXPECT_TRUE(same_values(x[1], x.select(0, 1)));
  EXPECT_EQ(x[1][2].item<float>(), x.select(0, 1).select(0, 2).item<float>());
  EXPECT_FLOAT_EQ(x[2][3].item<float>(), float(x.to_vector<double>()[11]));
  EXPECT_TRUE(same_values(x[-1], x.select(0, 2)));
  EXPECT_THROW(x[3], IndexError);
}

TEST(LibtorchHabits, PrintsValuesShapeAndType) {
  std::ostringstream a;
  a << from_vector<float>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(a.str(), " 1  2\n 3  4\n[ CPUFloatType{2,2} ]");
  std::ostringstream b;
  b << from_vector<double>({0.5, -1.25});
  EXPECT_EQ(b.str(), " 0.5000\n-1.2500\n[ CPUDoubleType{2} ]");
  std::ostringstream c;
  c << full({}, 7, kInt64);
  EXPECT_EQ(c.str(), "7\n[ CPULongType{} ]");
  std::ostringstream d;
  d << from_vector<int64_t>({1, 2, 3, 4}, {2, 1, 2});
  EXPECT_EQ(d.str(), "(1,.,.) = \n  1  2\n\n(2,.,.) = \n  3  4\n[ CPULongType{2,1,2} ]");
  std::ostringstream e;
  e << Tensor();
  EXPECT_EQ(e.str(), "[ Tensor (undefined) ]");
}

// libtorch's number formats (Note [printing]): small or large values get a
// common power-of-ten factor, a wide range goes scientific, never "0.0000".
TEST(LibtorchHabits, PrintsSmallAndLargeValuesAsLibtorch) {
  auto print = [](const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
  };
  // All below 0.1: scaled by 1e-05 (libtorch: "1e-05 *\n 1.0000\n 2.5000").
  EXPECT_EQ(print(from_vector<double>({1e-5, 2.5e-5})), "1e-05 *\n 1.0000\n 2.5000\n[ CPUDoubleType{2} ]");
  // More than 4 decades apart: scientific, width 11.
  EXPECT_EQ(print(from_vector<double>({1e-8, 1.5})), " 1.0000e-08\n 1.5000e+00\n[ CPUDoubleType{2} ]");
  // Large: more than 5 integer digits, scaled by 1e+06.
  EXPECT_EQ(print(from_vector<double>({1234567.5, 2e6})), "1e+06 *\n 1.2346\n 2.0000\n[ CPUDoubleType{2} ]");
  // A scaled matrix: the factor line, then rows with one more space.
  EXPECT_EQ(print(from_vector<double>({1e-5, 2e-5, 3e-5, 4.5e-5}, {2, 2})),
            "1e-05 *\n 1.0000  2.0000\n  3.0000  4.5000\n[ CPUDoubleType{2,2} ]");
  // Integers past 9 digits go scientific; a 0-d tensor prints its value.
  EXPECT_EQ(print(from_vector<int64_t>({int64_t(1) << 40, 1})), " 1.0995e+12\n 1.0000e+00\n[ CPULongType{2} ]");
  EXPECT_EQ(print(full({}, 1e-7, kFloat64)), "1e-07\n[ CPUDoubleType{} ]");
  // Wider than 80 columns: column blocks, as libtorch's "Columns 1 to 10".
  const std::string wide = print(full({1, 12}, 0.5, kFloat64));
  EXPECT_EQ(wide.substr(0, 17), "Columns 1 to 10 0") << wide;
  EXPECT_NE(wide.find("\nColumns 11 to 12 0.5000  0.5000\n"), std::string::npos) << wide;
}

// libtorch prints sizes as "[2, 3]"; so does Shape.
TEST(LibtorchHabits, ShapePrintsAsLibtorchSizes) {
  std::ostringstream os;
  os << Shape{2, 3} << " " << zeros({4}).shape() << " " << Shape{};
  EXPECT_EQ(os.str(), "[2, 3] [4] []");
}

// ---- 6. method forms of the free functions -----------------------------------------------

TEST(LibtorchHabits, MethodsAreTheFreeFunctions) {
  const Tensor x = vals({3, 4});
  const Tensor y = vals({3, 4}, 0.5);
  const Tensor idx = from_vector<int64_t>({2, 0});
  EXPECT_TRUE(same_values(x.eq(y), eq(x, y)));
  EXPECT_TRUE(same_values(x.ne(0.25), ne(x, 0.25)));
  EXPECT_TRUE(same_values(x.lt(y), lt(x, y)));
  EXPECT_TRUE(same_values(x.le(y), le(x, y)));
  EXPECT_TRUE(same_values(x.gt(0), gt(x, 0)));
  EXPECT_TRUE(same_values(x.ge(y), ge(x, y)));
  auto [values, indices] = x.max(1);
  auto [rv, ri] = max(x, 1);
  EXPECT_TRUE(same_values(values, rv));
  EXPECT_TRUE(same_values(indices, ri));
  EXPECT_TRUE(same_values(std::get<0>(x.max(0, true)), std::get<0>(max(x, 0, true))));
  EXPECT_TRUE(same_values(x.argmax(1), argmax(x, 1)));
  EXPECT_TRUE(same_values(x.index_select(0, idx), index_select(x, 0, idx)));
  const Tensor gi = from_vector<int64_t>({0, 3, 1, 1, 2, 0}, {3, 2});
  EXPECT_TRUE(same_values(x.gather(1, gi), gather(x, 1, gi)));
  EXPECT_TRUE(same_values(x.masked_fill(x > 0, -1.0), masked_fill(x, gt(x, 0), -1.0)));
  EXPECT_TRUE(same_values(x.softmax(-1), softmax(x, -1)));
  EXPECT_TRUE(same_values(x.log_softmax(1), log_softmax(x, 1)));
  EXPECT_TRUE(same_values(x.matmul(y.t()), matmul(x, y.t())));
  EXPECT_TRUE(same_values(x.var({1}, 0, true), var(x, {1}, 0, true)));
  EXPECT_TRUE(same_values(x.clamp(-0.5, 0.5), clamp(x, -0.5, 0.5)));
  EXPECT_TRUE(same_values(x.clamp(0), clamp(x, 0, std::nullopt)));
  EXPECT_TRUE(same_values(x.pow(2), pow(x, 2)));
  EXPECT_TRUE(same_values(abs(x).pow(y), pow(abs(x), y)));
  EXPECT_TRUE(same_values(x.tril(), tril(x)));
  EXPECT_TRUE(same_values(x.triu(1), triu(x, 1)));
  EXPECT_TRUE(same_values(x.maximum(y), maximum(x, y)));
  EXPECT_TRUE(same_values(x.minimum(y), minimum(x, y)));
  EXPECT_TRUE(same_values(x.where(x > 0, y), where(gt(x, 0), x, y)));
  EXPECT_EQ(x.split(2, 1).size(), 2u);
  EXPECT_TRUE(same_values(x.chunk(3)[1], chunk(x, 3)[1]));
  EXPECT_TRUE(same_values(x.transpose(0, 1).contiguous().flatten(), transpose(x, 0, 1).contiguous().flatten()));
  EXPECT_TRUE(same_values(x.unsqueeze(0).expand({2, 3, 4}).narrow(2, 1, 2).squeeze(),
                          narrow(expand(unsqueeze(x, 0), {2, 3, 4}), 2, 1, 2)));
  EXPECT_TRUE(same_values(x.permute({1, 0}).slice(0, 1, 3), slice(permute(x, {1, 0}), 0, 1, 3)));
}

// ---- 7. Module::to(dtype) and the small layers ----------------------------------------------

TEST(LibtorchHabits, ModuleToDtypeCastsFloatingTensorsOnly) {
  manual_seed(7);
  nn::Sequential m(nn::Linear(3, 4), nn::BatchNorm2d(4));
  auto lin = std::dynamic_pointer_cast<nn::LinearImpl>(m[0]);
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(m[1]);
  const std::vector<double> w = lin->weight.to_vector<double>();
  const Tensor handle = m->parameters()[0];
  m->to(kFloat64);
  EXPECT_EQ(lin->weight.dtype(), kFloat64);
  EXPECT_EQ(handle.dtype(), kFloat64);  // handles fetched before see the cast
  EXPECT_EQ(lin->weight.to_vector<double>(), w);
  EXPECT_TRUE(lin->weight.requires_grad());
  EXPECT_TRUE(lin->weight.is_leaf());
  EXPECT_EQ(bn->running_mean.dtype(), kFloat64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);  // integer buffers stay
  const Tensor y = lin->forward(vals({2, 3}, 1.0, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  y.sum().backward();
  EXPECT_EQ(lin->weight.grad().dtype(), kFloat64);
  m->to(Device(kCPU), kFloat32);
  EXPECT_EQ(lin->weight.dtype(), kFloat32);
  EXPECT_EQ(lin->weight.grad().dtype(), kFloat32);  // a defined grad is cast too
  EXPECT_EQ(lin->weight.to_vector<double>(), w);
  EXPECT_THROW(m->to(kInt64), TypeError);
}

TEST(LibtorchHabits, PoolingFlattenAndActivationModules) {
  const Tensor x = vals({2, 3, 6, 6});
  EXPECT_TRUE(same_values(nn::MaxPool2d(2)->forward(x), max_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_TRUE(same_values(nn::MaxPool2d(3, 1, 1)->forward(x), max_pool2d(x, {3, 3}, {1, 1}, {1, 1})));
  EXPECT_TRUE(same_values(nn::AvgPool2d(2)->forward(x), avg_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_TRUE(same_values(nn::AvgPool2d(nn::AvgPool2dOptions({3, 2}).stride({1, 2}))->forward(x), avg_pool2d(x, {3, 2}, {1, 2})));
  EXPECT_TRUE(same_values(nn::AdaptiveAvgPool2d(1)->forward(x), adaptive_avg_pool2d(x, {1, 1})));
  EXPECT_TRUE(same_values(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({2, 3}))->forward(x), adaptive_avg_pool2d(x, {2, 3})));
  EXPECT_EQ(nn::Flatten()->forward(x).shape(), (Shape{2, 108}));
  EXPECT_EQ(nn::Flatten(0, 1)->forward(x).shape(), (Shape{6, 6, 6}));
  EXPECT_TRUE(same_values(nn::SiLU()->forward(x), silu(x)));
  EXPECT_TRUE(same_values(nn::Tanh()->forward(x), tanh(x)));
  EXPECT_TRUE(same_values(nn::Sigmoid()->forward(x), sigmoid(x)));
  // A small CNN as a libtorch user writes it.
  manual_seed(8);
  nn::Sequential cnn(nn::Conv2d(3, 4, 3, 1, 1), nn::ReLU(), nn::MaxPool2d(2), nn::AdaptiveAvgPool2d(1),
                     nn::Flatten(), nn::Linear(4, 2));
  EXPECT_EQ(cnn->forward(x).shape(), (Shape{2, 2}));
}

// ---- 8. gradient clipping ------------------------------------------------------------------

// Values from PyTorch 1.13:
//   a = torch.nn.Parameter(torch.tensor([1., 2., 3.]))
//   b = torch.nn.Parameter(torch.tensor([[4., -5.], [6., 0.5]]))
//   a.grad = torch.tensor([0.5, -1.5, 2.0]); b.grad = torch.tensor([[3., -4.], [1., 0.25]])
//   torch.nn.utils.clip_grad_norm_([a, b], 2.0)            -> 5.706356048583984
//   torch.nn.utils.clip_grad_norm_([a, b], 1.0, norm_type=float('inf')) -> 4.0
//   torch.nn.utils.clip_grad_norm_([a, b], 100.0, norm_type=1.0)        -> 12.25 (no change)
//   torch.nn.utils.clip_grad_value_([a], 1.0)             -> a.grad [0.5, -1.0, 1.0]
struct ClipCase {
  Tensor a = from_vector<float>({1, 2, 3}).requires_grad_();
  Tensor b = from_vector<float>({4, -5, 6, 0.5}, {2, 2}).requires_grad_();
  ClipCase() {
    a.set_grad(from_vector<float>({0.5, -1.5, 2.0}));
    b.set_grad(from_vector<float>({3, -4, 1, 0.25}, {2, 2}));
  }
  std::vector<Tensor> list() const { return {a, b}; }
};

TEST(LibtorchHabits, ClipGradNormMatchesPyTorch) {
  {
    ClipCase c;
    EXPECT_NEAR(nn::utils::clip_grad_norm_(c.list(), 2.0), 5.706356048583984, 1e-6);
    EXPECT_TRUE(testing::allclose(c.a.grad(), {0.17524315416812897, -0.5257294774055481, 0.7009726166725159}));
    EXPECT_TRUE(testing::allclose(c.b.grad(), {1.0514589548110962, -1.4019452333450317, 0.35048630833625793,
                                               0.08762157708406448}));
  }
  {
    ClipCase c;
    EXPECT_DOUBLE_EQ(nn::utils::clip_grad_norm_(c.list(), 1.0, std::numeric_limits<double>::infinity()), 4.0);
    EXPECT_TRUE(testing::allclose(c.a.grad(), {0.12499997019767761, -0.37499991059303284, 0.49999988079071045}));
    EXPECT_TRUE(testing::allclose(c.b.grad(), {0.7499998211860657, -0.9999997615814209, 0.24999994039535522,
                                               0.062499985098838806}));
  }
  {
    ClipCase c;
    EXPECT_DOUBLE_EQ(nn::utils::clip_grad_norm_(c.list(), 100.0, 1.0), 12.25);
    EXPECT_TRUE(testing::allclose(c.a.grad(), {0.5, -1.5, 2.0}, 0, 0));  // the coefficient is clamped to 1
  }
  {
    ClipCase c;
    nn::utils::clip_grad_value_(c.a, 1.0);
    EXPECT_TRUE(testing::allclose(c.a.grad(), {0.5, -1.0, 1.0}, 0, 0));
  }
  ClipCase c;
  c.b.set_grad(from_vector<float>({std::numeric_limits<float>::infinity(), 0, 0, 0}, {2, 2}));
  EXPECT_THROW(nn::utils::clip_grad_norm_(c.list(), 1.0, 2.0, true), ValueError);
  EXPECT_THROW(nn::utils::clip_grad_norm_(c.list(), 1.0, -1.0), ValueError);
  EXPECT_THROW(nn::utils::clip_grad_value_(c.list(), -1.0), ValueError);
  EXPECT_DOUBLE_EQ(nn::utils::clip_grad_norm_(std::vector<Tensor>{from_vector<float>({1}).requires_grad_()}, 1.0),
                   0.0);
}

TEST(LibtorchHabits, ClipGradNormOverTwoDevices) {
  ClipCase cpu;
  ClipCase two;
  const Device d = testing::second_device();
  Tensor b = two.b.detach().to(d).requires_grad_();
  b.set_grad(two.b.grad().to(d));
  const double total = nn::utils::clip_grad_norm_({two.a, b}, 2.0);
  EXPECT_DOUBLE_EQ(total, nn::utils::clip_grad_norm_(cpu.list(), 2.0));
  EXPECT_EQ(b.grad().device(), d);
  EXPECT_TRUE(testing::bitwise_equal(b.grad().cpu(), cpu.b.grad()));
  EXPECT_TRUE(testing::bitwise_equal(two.a.grad(), cpu.a.grad()));
}

// ---- 9. learning-rate schedulers -------------------------------------------------------------

// Values from PyTorch 1.13 (lr after construction, then after each of 8 steps):
//   p = [torch.nn.Parameter(torch.zeros(1))]
//   o = torch.optim.SGD(p, lr=0.1); s = <scheduler>(o, ...)
//   out = [s.get_last_lr()[0]]
//   for _ in range(8): o.step(); s.step(); out.append(s.get_last_lr()[0])
std::vector<double> run_scheduler(optim::Optimizer& opt, optim::LRScheduler& s) {
  std::vector<double> out{s.get_last_lr()[0]};
  for (int i = 0; i < 8; ++i) {
    opt.step();
    s.step();
    out.push_back(s.get_last_lr()[0]);
    EXPECT_DOUBLE_EQ(opt.lr(), out.back());
  }
  return out;
}

void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "step " << i;
}

TEST(LibtorchHabits, LearningRateSchedulersMatchPyTorch) {
  const Tensor p = zeros({1}).requires_grad_();
  {
    optim::SGD opt({p}, 0.1);
    optim::StepLR s(opt, /*step_size=*/3, /*gamma=*/0.5);
    expect_values(run_scheduler(opt, s), {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025});
  }
  {
    optim::SGD opt({p}, 0.1);
    optim::CosineAnnealingLR s(opt, /*T_max=*/4, /*eta_min=*/0.01);
    expect_values(run_scheduler(opt, s),
                  {0.1, 0.08681980515339464, 0.05500000000000001, 0.023180194846605363, 0.01,
                   0.023180194846605363, 0.05500000000000002, 0.08681980515339469, 0.10000000000000006});
  }
  {
    optim::SGD opt({p}, 0.1);
    optim::LambdaLR s(opt, [](int64_t epoch) { return std::pow(0.95, double(epoch)); });
    std::vector<double> got = run_scheduler(opt, s);
    expect_values(got, {0.1, 0.095, 0.09025, 0.0857375, 0.081450625, 0.07737809374999999,
                        0.07350918906249998, 0.06983372960937498, 0.06634204312890622});
    EXPECT_EQ(s.last_epoch(), 8);
  }
  optim::SGD opt({p}, 0.1);
  EXPECT_THROW(optim::StepLR(opt, 0), ValueError);
  EXPECT_THROW(optim::CosineAnnealingLR(opt, 0), ValueError);
  EXPECT_THROW(optim::LambdaLR(opt, nullptr), ValueError);
}

// ---- 10. the one header -----------------------------------------------------------------------

TEST(LibtorchHabits, OneHeaderHasTheLoggingSetters) {
  const std::string old = global_options().log_level;
  set_log_level("error");
  EXPECT_EQ(global_options().log_level, "error");
  EXPECT_THROW(set_log_level("loud"), ValueError);
  set_log_level(old);
  EXPECT_EQ(global_options().log_level, old);
}

}  // namespace
}  // namespace dtr
