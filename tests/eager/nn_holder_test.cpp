// libtorch's C++ nn frontend in dtr: module holders (TORCH_MODULE, nullptr,
// shared impls, .), register_module returning the module, named_modules /
// modules / children / apply in PyTorch's order, Sequential of any module
// with forward(Tensor), every layer's *Options with PyTorch's defaults,
// layers built from options equal to layers built from positional
// arguments, the loss modules against PyTorch 1.13 values, and
// nn::functional against the dtr ops it calls.
#include <memory>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

namespace F = nn::functional;
using testing::allclose;
using testing::bitwise_equal;
using testing::throws_with;

// ---- holders ------------------------------------------------------------------------

struct TwoLayerImpl : nn::Module {
  TwoLayerImpl() : fc1(register_module("fc1", nn::Linear(8, 4))) {
    fc2 = register_module("fc2", nn::Linear(4, 2));
  }
  Tensor forward(Tensor x) { return fc2(relu(fc1(x))); }
  nn::Linear fc1, fc2{nullptr};
};
DTR_MODULE(TwoLayer);

struct NeedsArgsImpl : nn::Module {
  explicit NeedsArgsImpl(int64_t n) : n(n) {}
  Tensor forward(const Tensor& x) { return x * double(n); }
  int64_t n;
};
TORCH_MODULE(NeedsArgs);

TEST(NNHolder, DefaultConstructsTheImplAndCopiesShareIt) {
  TwoLayer a;
  ASSERT_FALSE(a.is_empty());
  EXPECT_TRUE(static_cast<bool>(a));
  TwoLayer b = a;
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a.ptr(), b.ptr());
  EXPECT_EQ(&*a, a.get());
  {
    NoGradGuard no_grad;
    b->fc1->weight.zero_();
  }
  EXPECT_EQ(a->fc1->weight.abs().sum().item<float>(), 0.0f);
  // operator() forwards to forward().
  const Tensor x = randn({3, 8});
  EXPECT_TRUE(bitwise_equal(a(x), a->forward(x)));
  std::shared_ptr<TwoLayerImpl> p = a.ptr();
  EXPECT_EQ(p.use_count(), 3);  // a, b and p
  NeedsArgs n(3);
  EXPECT_EQ(n->n, 3);
}

TEST(NNHolder, NullptrHoldersAreEmptyAndThrowOnAccess) {
  nn::Linear a{nullptr};
  nn::Linear b = nullptr;
  EXPECT_TRUE(a.is_empty());
  EXPECT_TRUE(b.is_empty());
  EXPECT_FALSE(static_cast<bool>(a));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)a->weight; }, {"empty module holder"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)a.ptr(); }, {"empty module holder"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)*a; }, {"empty module holder"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)a(ones({1, 2})); }, {"empty module holder"}));
  nn::Module parent;
  EXPECT_THROW(parent.register_module("x", a), ValueError);
  a = nn::Linear(2, 3);
  EXPECT_FALSE(a.is_empty());
  EXPECT_EQ(a->weight.shape(), (Shape{3, 2}));
}

TEST(NNHolder, RegisterModuleReturnsTheModuleForHolderMembers) {
  TwoLayer net;
  std::vector<std::string> names;
  for (const auto& p : net->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  // The member and the registered child are the same module.
  EXPECT_EQ(net->named_children()[0].value().get(), net->fc1.get());
  EXPECT_EQ(net->named_children()["fc2"].get(), net->fc2.get());
  // register_module with a shared_ptr returns the shared_ptr.
  auto parent = std::make_shared<nn::Module>();
  auto impl = std::make_shared<nn::LinearImpl>(2, 2);
  EXPECT_EQ(parent->register_module("l", impl), impl);
  // named_parameters() items are also (name, tensor) pairs.
  for (auto& [n, t] : parent->named_parameters()) EXPECT_EQ(n.substr(0, 2), "l.");
  EXPECT_TRUE(parent->named_parameters().contains("l.weight"));
  EXPECT_EQ(parent->named_parameters()["l.bias"].shape(), (Shape{2}));
  EXPECT_THROW((void)parent->named_parameters()["l.nope"], IndexError);
}

// PyTorch:
//   class Net(nn.Module):
//     def __init__(self):
//       super().__init__(); self.fc1 = nn.Linear(8, 4)
//       self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU()); self.head = nn.Linear(4, 2)
//       self.tied = self.fc1
//   [n for n, _ in Net().named_modules()]           == ['', 'fc1', 'seq', 'seq.0', 'seq.1', 'head']
//   [n for n, _ in Net().named_modules(prefix='net')] == ['net', 'net.fc1', 'net.seq', 'net.seq.0', 'net.seq.1', 'net.head']
//   [n for n, _ in Net().named_children()]          == ['fc1', 'seq', 'head', 'tied']
struct NetImpl : nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", nn::Linear(8, 4));
    seq = register_module("seq", nn::Sequential(nn::Linear(4, 4), nn::ReLU()));
    head = register_module("head", nn::Linear(4, 2));
    register_module("tied", fc1);
  }
  Tensor forward(const Tensor& x) { return head(seq(fc1(x))); }
  nn::Linear fc1{nullptr}, head{nullptr};
  nn::Sequential seq{nullptr};
};
DTR_MODULE(Net);

std::vector<std::string> keys(const nn::NamedModules& m) { return m.keys(); }

TEST(NNHolder, NamedModulesMatchPyTorch) {
  Net net;
  EXPECT_EQ(keys(net->named_modules()),
            (std::vector<std::string>{"", "fc1", "seq", "seq.0", "seq.1", "head"}));
  EXPECT_EQ(keys(net->named_modules("net")),
            (std::vector<std::string>{"net", "net.fc1", "net.seq", "net.seq.0", "net.seq.1", "net.head"}));
  EXPECT_EQ(keys(net->named_modules("", false)),
            (std::vector<std::string>{"fc1", "seq", "seq.0", "seq.1", "head"}));
  EXPECT_EQ(keys(net->named_children()), (std::vector<std::string>{"fc1", "seq", "head", "tied"}));
  EXPECT_EQ(net->named_modules()[0].value().get(), net.get());
  EXPECT_EQ(net->modules().size(), 6u);
  EXPECT_EQ(net->children().size(), 4u);
  EXPECT_EQ(net->children()[3].get(), net->fc1.get());
  // apply visits each module once, in named_modules order.
  std::vector<std::string> seen;
  net->apply([&](nn::Module& m) { seen.push_back(m.name()); });
  EXPECT_EQ(seen, (std::vector<std::string>{"Module", "Linear", "Sequential", "Linear", "ReLU", "Linear"}));
  std::vector<std::string> named;
  net->apply([&](const std::string& n, nn::Module&) { named.push_back(n); }, "m");
  EXPECT_EQ(named, (std::vector<std::string>{"m", "m.fc1", "m.seq", "m.seq.0", "m.seq.1", "m.head"}));
  int count = 0;
  net->apply([&](const std::shared_ptr<nn::Module>& m) { count += m != nullptr; });
  EXPECT_EQ(count, 6);
  // A zero-init pass through apply, as libtorch programs write it.
  net->apply([](nn::Module& m) {
    if (auto* l = dynamic_cast<nn::LinearImpl*>(&m)) l->bias.detach().zero_();
  });
  EXPECT_EQ(net->head->bias.abs().sum().item<float>(), 0.0f);
  // include_self needs a shared_ptr-owned module.
  nn::Module on_stack;
  EXPECT_TRUE(throws_with<ValueError>([&] { on_stack.named_modules(); }, {"shared_ptr"}));
  EXPECT_TRUE(on_stack.named_modules("", false).is_empty());
}

TEST(NNHolder, TrainAndEvalReachChildrenThroughHolders) {
  Net net;
  net->eval();
  EXPECT_FALSE(net->is_training());
  EXPECT_FALSE(net->seq[1]->is_training());
  net->train();
  EXPECT_TRUE(net->seq->ptr(0)->is_training());
}

// ---- Sequential of any module --------------------------------------------------------

// Plain libtorch style, without a holder.
struct Doubler : nn::Module {
  Tensor forward(Tensor x) { return x * 2.0; }
};

TEST(NNHolder, SequentialTakesHoldersSharedPtrsAndUserModules) {
  manual_seed(3);
  auto doubler = std::make_shared<Doubler>();
  TwoLayer two;
  nn::Sequential seq(nn::Linear(5, 8), nn::ReLU(), two, doubler, nn::Functional(dtr::tanh));
  ASSERT_EQ(seq->size(), 5u);
  const Tensor x = randn({4, 5});
  const Tensor want = tanh(two(relu(seq->ptr<nn::LinearImpl>(0)->forward(x))) * 2.0);
  EXPECT_TRUE(bitwise_equal(seq(x), want));
  EXPECT_TRUE(bitwise_equal(seq->forward(x), want));
  EXPECT_EQ(seq[2].get(), two.get());
  EXPECT_EQ(seq->ptr<Doubler>(3), doubler);
  EXPECT_EQ(&seq->at<TwoLayerImpl>(2), two.get());
  EXPECT_THROW(seq->ptr<nn::ReLUImpl>(0), TypeError);
  EXPECT_THROW(seq->ptr(5), IndexError);
  EXPECT_EQ(keys(seq->named_children()), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  // Parameters of every child, the user module's included.
  EXPECT_EQ(seq->parameters().size(), 6u);
  // Named children.
  nn::Sequential named({{"fc", nn::Linear(5, 2)}, {"act", nn::Tanh()}});
  EXPECT_EQ(keys(named->named_children()), (std::vector<std::string>{"fc", "act"}));
  named->push_back("dbl", Doubler());
  EXPECT_EQ(named->size(), 3u);
  // ModuleList holds any module.
  nn::ModuleList list(nn::Linear(2, 2), doubler);
  list->push_back(nn::MSELoss());
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list[1].get(), doubler.get());
  EXPECT_EQ(list->ptr<nn::MSELossImpl>(2)->name(), "MSELoss");
}

// ---- options: PyTorch's defaults ---------------------------------------------------------

TEST(NNOptions, DefaultsArePyTorchs) {
  EXPECT_TRUE(nn::LinearOptions(3, 4).bias());
  const auto c = nn::Conv2dOptions(1, 10, 5);
  EXPECT_EQ(c.kernel_size(), nn::Pair2(5, 5));
  EXPECT_EQ(c.stride(), nn::Pair2(1));
  EXPECT_EQ(c.padding(), nn::Pair2(0));
  EXPECT_EQ(c.dilation(), nn::Pair2(1));
  EXPECT_EQ(c.groups(), 1);
  EXPECT_TRUE(c.bias());
  const auto ct = nn::ConvTranspose2dOptions(4, 2, 3);
  EXPECT_EQ(ct.output_padding(), nn::Pair2(0));
  EXPECT_EQ(ct.stride(), nn::Pair2(1));
  EXPECT_TRUE(ct.bias());
  const auto bn = nn::BatchNorm2dOptions(8);
  EXPECT_DOUBLE_EQ(bn.eps(), 1e-5);
  EXPECT_EQ(bn.momentum(), std::optional<double>(0.1));
  EXPECT_TRUE(bn.affine());
  EXPECT_TRUE(bn.track_running_stats());
  const auto ln = nn::LayerNormOptions({4});
  EXPECT_DOUBLE_EQ(ln.eps(), 1e-5);
  EXPECT_TRUE(ln.elementwise_affine());
  EXPECT_DOUBLE_EQ(nn::GroupNormOptions(2, 4).eps(), 1e-5);
  EXPECT_TRUE(nn::GroupNormOptions(2, 4).affine());
  EXPECT_FALSE(nn::RMSNormOptions({4}).eps().has_value());
  EXPECT_DOUBLE_EQ(nn::DropoutOptions().p(), 0.5);
  EXPECT_FALSE(nn::DropoutOptions().inplace());
  EXPECT_DOUBLE_EQ(nn::LeakyReLUOptions().negative_slope(), 0.01);
  EXPECT_EQ(nn::GELUOptions().approximate(), "none");
  EXPECT_DOUBLE_EQ(nn::HardtanhOptions().min_val(), -1.0);
  EXPECT_DOUBLE_EQ(nn::HardtanhOptions().max_val(), 1.0);
  EXPECT_EQ(nn::MaxPool2dOptions(3).stride(), nn::Pair2(3));  // stride = kernel_size
  EXPECT_EQ(nn::MaxPool2dOptions(3).padding(), nn::Pair2(0));
  EXPECT_EQ(nn::FlattenOptions().start_dim(), 1);
  EXPECT_EQ(nn::FlattenOptions().end_dim(), -1);
  EXPECT_TRUE(std::holds_alternative<enumtype::kNearest>(nn::UpsampleOptions().mode()));
  EXPECT_EQ(nn::CrossEntropyLossOptions().reduction(), Reduction::Mean);
  EXPECT_EQ(nn::CrossEntropyLossOptions().ignore_index(), -100);
  EXPECT_DOUBLE_EQ(nn::CrossEntropyLossOptions().label_smoothing(), 0.0);
  EXPECT_EQ(nn::NLLLossOptions().ignore_index(), -100);
  EXPECT_EQ(nn::MSELossOptions().reduction(), kMean);
  EXPECT_DOUBLE_EQ(nn::SmoothL1LossOptions().beta(), 1.0);
  EXPECT_FALSE(nn::BCELossOptions().weight().defined());
  EXPECT_DOUBLE_EQ(F::DropoutFuncOptions().p(), 0.5);
  EXPECT_TRUE(F::DropoutFuncOptions().training());
  EXPECT_FALSE(F::BatchNormFuncOptions().training());
  EXPECT_DOUBLE_EQ(F::NormalizeFuncOptions().p(), 2.0);
  EXPECT_EQ(F::NormalizeFuncOptions().dim(), 1);
  EXPECT_DOUBLE_EQ(F::NormalizeFuncOptions().eps(), 1e-12);
  EXPECT_DOUBLE_EQ(F::PadFuncOptions({1, 1}).value(), 0.0);
  // Both reduction spellings, and the chained setters.
  EXPECT_EQ(nn::MSELossOptions(kSum).reduction().name(), "sum");
  EXPECT_EQ(nn::MSELossOptions().reduction(Reduction::None).reduction().name(), "none");
  const auto chained = nn::Conv2dOptions(3, 16, 3).stride(2).padding({1, 2}).bias(false);
  EXPECT_EQ(chained.stride(), nn::Pair2(2));
  EXPECT_EQ(chained.padding(), nn::Pair2(1, 2));
  EXPECT_FALSE(chained.bias());
}

// ---- options and positional forms build the same layer -----------------------------------

template <typename A, typename B>
void expect_same_layer(A a_factory, B b_factory, const Tensor& x) {
  manual_seed(21);
  auto a = a_factory();
  manual_seed(21);
  auto b = b_factory();
  const auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bitwise_equal(pa[i], pb[i]));
  a->eval();
  b->eval();
  EXPECT_TRUE(bitwise_equal(a(x), b(x)));
}

TEST(NNOptions, OptionsAndPositionalFormsAgree) {
  manual_seed(5);
  const Tensor img = randn({2, 4, 9, 9}), vec = randn({3, 6});
  expect_same_layer([] { return nn::Linear(nn::LinearOptions(6, 5).bias(false)); },
                    [] { return nn::Linear(6, 5, false); }, vec);
  expect_same_layer([] { return nn::Conv2d(nn::Conv2dOptions(4, 6, 3).stride(2).padding(1).bias(false)); },
                    [] { return nn::Conv2d(4, 6, 3, 2, 1, 1, 1, false); }, img);
  expect_same_layer([] { return nn::ConvTranspose2d(nn::ConvTranspose2dOptions(4, 2, 3).stride(2).output_padding(1)); },
                    [] { return nn::ConvTranspose2d(4, 2, 3, 2, 0, 1); }, img);
  expect_same_layer([] { return nn::BatchNorm2d(nn::BatchNorm2dOptions(4).eps(1e-3).momentum(0.2)); },
                    [] { return nn::BatchNorm2d(4, 1e-3, 0.2); }, img);
  expect_same_layer([] { return nn::LayerNorm(nn::LayerNormOptions({6}).eps(1e-3)); },
                    [] { return nn::LayerNorm(std::vector<int64_t>{6}, 1e-3); }, vec);
  expect_same_layer([] { return nn::GroupNorm(nn::GroupNormOptions(2, 4).eps(1e-4)); },
                    [] { return nn::GroupNorm(2, 4, 1e-4); }, img);
  expect_same_layer([] { return nn::RMSNorm(nn::RMSNormOptions({6}).eps(1e-6)); },
                    [] { return nn::RMSNorm(std::vector<int64_t>{6}, 1e-6); }, vec);
  expect_same_layer([] { return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)); },
                    [] { return nn::MaxPool2d(3, 2, 1); }, img);
  expect_same_layer([] { return nn::AvgPool2d(nn::AvgPool2dOptions(2)); }, [] { return nn::AvgPool2d(2, 2); }, img);
  expect_same_layer([] { return nn::Hardtanh(nn::HardtanhOptions().min_val(-0.5).max_val(0.5)); },
                    [] { return nn::Hardtanh(-0.5, 0.5); }, vec);
  expect_same_layer([] { return nn::Flatten(nn::FlattenOptions().start_dim(2)); }, [] { return nn::Flatten(2); },
                    img);
  expect_same_layer([] { return nn::Upsample(nn::UpsampleOptions().scale_factor(std::vector<double>{2, 2}).mode(kBilinear).align_corners(false)); },
                    [] { return nn::Upsample(std::vector<int64_t>{}, std::vector<double>{2, 2}, "bilinear", false); },
                    img);
  expect_same_layer([] { return nn::GELU(nn::GELUOptions().approximate("tanh")); }, [] { return nn::GELU("tanh"); },
                    vec);
  expect_same_layer([] { return nn::Embedding(nn::EmbeddingOptions(10, 3)); }, [] { return nn::Embedding(10, 3); },
                    from_vector<int64_t>({1, 9, 0}, {3}));
  expect_same_layer([] { return nn::CausalSelfAttention(nn::CausalSelfAttentionOptions(6, 2).bias(false)); },
                    [] { return nn::CausalSelfAttention(6, 2, 0.0, false); }, randn({1, 3, 6}));
  // The new modules against the ops they stand for.
  EXPECT_TRUE(bitwise_equal(nn::Softmax(1)(vec), softmax(vec, 1)));
  EXPECT_TRUE(bitwise_equal(nn::LogSoftmax(nn::LogSoftmaxOptions(0))(vec), log_softmax(vec, 0)));
  EXPECT_TRUE(bitwise_equal(nn::Identity()(vec), vec));
  EXPECT_TRUE(bitwise_equal(nn::ReLU6()(vec * 10.0), clamp(vec * 10.0, 0.0, 6.0)));
  EXPECT_TRUE(bitwise_equal(nn::Functional(softmax, int64_t{1})(vec), softmax(vec, 1)));
  EXPECT_TRUE(allclose(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2))(
                           from_vector<float>({-2.0f, -0.5f, 0.0f, 1.5f}, {4})),
                       // F.leaky_relu(torch.tensor([-2.0, -0.5, 0.0, 1.5]), 0.2).tolist()
                       {-0.4000000059604645, -0.10000000149011612, 0.0, 1.5}, 0.0, 0.0));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)nn::Dropout(nn::DropoutOptions(1.5)); }, {"between 0 and 1"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)nn::Upsample(nn::UpsampleOptions()); }, {"size or scale_factor"}));
}

// ---- losses against PyTorch 1.13 ------------------------------------------------------------

// import torch, torch.nn.functional as F
// x = torch.tensor([[0.2, -1.3, 0.7, 2.1], [1.5, 0.3, -0.4, -2.2], [0.0, 0.9, -1.1, 0.4]])
// y = torch.tensor([3, 0, 2]); yi = torch.tensor([3, -100, 2])
Tensor logits() { return from_vector<float>({0.2f, -1.3f, 0.7f, 2.1f, 1.5f, 0.3f, -0.4f, -2.2f, 0.0f, 0.9f, -1.1f, 0.4f}, {3, 4}); }
Tensor classes() { return from_vector<int64_t>({3, 0, 2}, {3}); }

TEST(NNLoss, CrossEntropyAndNllMatchPyTorch) {
  const Tensor x = logits(), y = classes(), yi = from_vector<int64_t>({3, -100, 2}, {3});
  // F.cross_entropy(x, y, reduction=r)
  EXPECT_TRUE(allclose(nn::CrossEntropyLoss()(x, y), {1.1703598499298096}));
  EXPECT_TRUE(allclose(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions().reduction(kSum))(x, y), {3.5110795497894287}));
  EXPECT_TRUE(allclose(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions(Reduction::None))(x, y),
                       {0.35735198855400085, 0.38898763060569763, 2.764739990234375}));
  // F.cross_entropy(x, y, reduction=r, label_smoothing=0.1)
  const auto ls = nn::CrossEntropyLossOptions().label_smoothing(0.1);
  EXPECT_TRUE(allclose(nn::CrossEntropyLoss(ls)(x, y), {1.2445265054702759}));
  EXPECT_TRUE(allclose(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions(ls).reduction(kSum))(x, y), {3.733579397201538}));
  EXPECT_TRUE(allclose(nn::CrossEntropyLoss(nn::CrossEntropyLossOptions(ls).reduction(kNone))(x, y),
                       {0.5248519778251648, 0.5589876174926758, 2.649739980697632}));
  // F.cross_entropy(x, yi, reduction=r, label_smoothing=0.2)
  const auto ign = nn::CrossEntropyLossOptions().label_smoothing(0.2);
  EXPECT_TRUE(allclose(F::cross_entropy(x, yi, ign), {1.6135461330413818}));
  EXPECT_TRUE(allclose(F::cross_entropy(x, yi, F::CrossEntropyFuncOptions(ign).reduction(kSum)), {3.2270922660827637}));
  EXPECT_TRUE(allclose(F::cross_entropy(x, yi, F::CrossEntropyFuncOptions(ign).reduction(kNone)),
                       {0.6923519968986511, 0.0, 2.5347399711608887}));
  // F.nll_loss(F.log_softmax(x, 1), y, reduction=r)
  const Tensor lp = F::log_softmax(x, F::LogSoftmaxFuncOptions(1));
  EXPECT_TRUE(allclose(nn::NLLLoss()(lp, y), {1.1703598499298096}));
  EXPECT_TRUE(allclose(F::nll_loss(lp, y, F::NLLLossFuncOptions().reduction(kSum)), {3.5110795497894287}));
  EXPECT_TRUE(bitwise_equal(F::cross_entropy(x, y), cross_entropy(x, y)));
  EXPECT_THROW(F::cross_entropy(x, y, F::CrossEntropyFuncOptions().label_smoothing(1.5)), ValueError);
}

// a = torch.tensor([[0.5, -1.0, 2.0], [0.25, 3.0, -0.75]])
// b = torch.tensor([[1.0, 0.5, -1.0], [0.0, 2.25, 0.5]])
Tensor lhs() { return from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -0.75f}, {2, 3}); }
Tensor rhs() { return from_vector<float>({1.0f, 0.5f, -1.0f, 0.0f, 2.25f, 0.5f}, {2, 3}); }

TEST(NNLoss, RegressionLossesMatchPyTorch) {
  const Tensor a = lhs(), b = rhs();
  // F.mse_loss(a, b, reduction=r), F.l1_loss, F.smooth_l1_loss(beta=1 and 0.5)
  EXPECT_TRUE(allclose(nn::MSELoss()(a, b), {2.28125}));
  EXPECT_TRUE(allclose(nn::MSELoss(kSum)(a, b), {13.6875}));
  EXPECT_TRUE(allclose(nn::MSELoss(nn::MSELossOptions(kNone))(a, b), {0.25, 2.25, 9.0, 0.0625, 0.5625, 1.5625}));
  EXPECT_TRUE(allclose(nn::L1Loss()(a, b), {1.2083333730697632}));
  EXPECT_TRUE(allclose(nn::L1Loss(kSum)(a, b), {7.25}));
  EXPECT_TRUE(allclose(F::l1_loss(a, b, F::L1LossFuncOptions(kNone)), {0.5, 1.5, 3.0, 0.25, 0.75, 1.25}));
  EXPECT_TRUE(allclose(nn::SmoothL1Loss()(a, b), {0.78125}));
  EXPECT_TRUE(allclose(nn::SmoothL1Loss(kSum)(a, b), {4.6875}));
  EXPECT_TRUE(allclose(nn::SmoothL1Loss(nn::SmoothL1LossOptions(kNone))(a, b),
                       {0.125, 1.0, 2.5, 0.03125, 0.28125, 0.75}));
  EXPECT_TRUE(allclose(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0.5))(a, b), {0.96875}));
  EXPECT_TRUE(allclose(F::smooth_l1_loss(a, b, F::SmoothL1LossFuncOptions(kNone).beta(0.5)),
                       {0.25, 1.25, 2.75, 0.0625, 0.5, 1.0}));
  EXPECT_TRUE(bitwise_equal(F::mse_loss(a, b), mse_loss(a, b)));
}

TEST(NNLoss, BinaryCrossEntropyMatchesPyTorch) {
  // p = torch.tensor([[0.1, 0.8, 0.5], [0.99, 0.3, 0.0]])
  // t = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]); w = torch.tensor([1.0, 2.0, 0.5])
  const Tensor p = from_vector<float>({0.1f, 0.8f, 0.5f, 0.99f, 0.3f, 0.0f}, {2, 3});
  const Tensor t = from_vector<float>({0.0f, 1.0f, 1.0f, 1.0f, 0.0f, 0.0f}, {2, 3});
  const Tensor w = from_vector<float>({1.0f, 2.0f, 0.5f}, {3});
  // F.binary_cross_entropy(p, t, reduction=r) and with weight=w
  EXPECT_TRUE(allclose(nn::BCELoss()(p, t), {0.23139607906341553}));
  EXPECT_TRUE(allclose(nn::BCELoss(kSum)(p, t), {1.3883764743804932}));
  EXPECT_TRUE(allclose(nn::BCELoss(nn::BCELossOptions(kNone))(p, t),
                       {0.10536054521799088, 0.2231435328722, 0.6931471824645996, 0.010050326585769653,
                        0.3566749691963196, 0.0}));
  EXPECT_TRUE(allclose(nn::BCELoss(nn::BCELossOptions().weight(w))(p, t), {0.2702702581882477}));
  EXPECT_TRUE(allclose(F::binary_cross_entropy(p, t, F::BinaryCrossEntropyFuncOptions(kSum).weight(w)),
                       {1.6216214895248413}));
  // F.binary_cross_entropy_with_logits(a, t, reduction=r) and with pos_weight=[2.0, 0.5, 1.5]
  const Tensor a = lhs();
  EXPECT_TRUE(allclose(nn::BCEWithLogitsLoss()(a, t), {1.0709439516067505}));
  EXPECT_TRUE(allclose(nn::BCEWithLogitsLoss(kSum)(a, t), {6.425663948059082}));
  EXPECT_TRUE(allclose(nn::BCEWithLogitsLoss(nn::BCEWithLogitsLossOptions(kNone))(a, t),
                       {0.9740769863128662, 1.31326162815094, 0.12692804634571075, 0.575939416885376,
                        3.0485873222351074, 0.38687101006507874}));
  const Tensor pw = from_vector<float>({2.0f, 0.5f, 1.5f}, {3});
  EXPECT_TRUE(allclose(nn::BCEWithLogitsLoss(nn::BCEWithLogitsLossOptions().pos_weight(pw))(a, t),
                       {1.06807279586792}));
  EXPECT_TRUE(allclose(F::binary_cross_entropy_with_logits(
                           a, t, F::BinaryCrossEntropyWithLogitsFuncOptions(kNone).pos_weight(pw)),
                       {0.9740769863128662, 0.65663081407547, 0.19039207696914673, 1.151878833770752,
                        3.0485873222351074, 0.38687098026275635}));
  EXPECT_TRUE(throws_with<ValueError>([&] { nn::BCELoss()(p, w); }, {"same shape"}));
}

TEST(NNLoss, LossModulesBackpropagate) {
  const Tensor x = logits().requires_grad_(true);
  nn::CrossEntropyLoss loss_fn(nn::CrossEntropyLossOptions().label_smoothing(0.1));
  loss_fn(x, classes()).backward();
  ASSERT_TRUE(x.grad().defined());
  // Each row of the gradient of a mean cross entropy sums to zero.
  EXPECT_TRUE(allclose(x.grad().sum({1}), {0.0, 0.0, 0.0}, 1e-6, 0.0));
}

// ---- functional against the ops ----------------------------------------------------------

TEST(NNFunctional, CallsTheOps) {
  manual_seed(9);
  const Tensor x = randn({2, 3, 6, 6}), v = randn({4, 5});
  const Tensor w = randn({4, 3, 3, 3}), b = randn({4});
  EXPECT_TRUE(bitwise_equal(F::relu(v), relu(v)));
  EXPECT_TRUE(bitwise_equal(F::gelu(v, F::GELUFuncOptions().approximate("tanh")), gelu(v, "tanh")));
  EXPECT_TRUE(bitwise_equal(F::silu(v), silu(v)));
  EXPECT_TRUE(bitwise_equal(F::softmax(v, F::SoftmaxFuncOptions(1)), softmax(v, 1)));
  EXPECT_TRUE(bitwise_equal(F::log_softmax(v, F::LogSoftmaxFuncOptions(0).dtype(kFloat64)),
                            log_softmax(v.to(kFloat64), 0)));
  EXPECT_TRUE(bitwise_equal(F::dropout(v, F::DropoutFuncOptions().training(false)), v));
  manual_seed(1);
  const Tensor d1 = F::dropout(v, F::DropoutFuncOptions().p(0.3));
  manual_seed(1);
  EXPECT_TRUE(bitwise_equal(d1, dropout(v, 0.3, true)));
  EXPECT_TRUE(bitwise_equal(F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).stride(2).padding(1)),
                            conv2d(x, w, b, {2, 2}, {1, 1})));
  EXPECT_TRUE(bitwise_equal(F::max_pool2d(x, F::MaxPool2dFuncOptions(2)), max_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_TRUE(bitwise_equal(F::avg_pool2d(x, F::AvgPool2dFuncOptions(3).stride(1).padding(1)),
                            avg_pool2d(x, {3, 3}, {1, 1}, {1, 1})));
  EXPECT_TRUE(bitwise_equal(F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions(2)),
                            adaptive_avg_pool2d(x, {2, 2})));
  const Tensor lw = randn({3, 5}), lb = randn({3});
  EXPECT_TRUE(bitwise_equal(F::linear(v, lw, lb), linear(v, lw, lb)));
  EXPECT_TRUE(bitwise_equal(F::layer_norm(v, F::LayerNormFuncOptions({5}).eps(1e-3)),
                            layer_norm(v, {5}, Tensor(), Tensor(), 1e-3)));
  EXPECT_TRUE(bitwise_equal(F::group_norm(x, F::GroupNormFuncOptions(3)), group_norm(x, 3)));
  const Tensor rm = zeros({3}), rv = ones({3});
  EXPECT_TRUE(bitwise_equal(F::batch_norm(x, rm, rv), batch_norm(x, rm, rv, Tensor(), Tensor(), false)));
  const Tensor table = randn({7, 2}), idx = from_vector<int64_t>({6, 0, 3}, {3});
  EXPECT_TRUE(bitwise_equal(F::embedding(idx, table), embedding(table, idx)));
  EXPECT_TRUE(bitwise_equal(F::one_hot(idx, 7), one_hot(idx, 7)));
  EXPECT_TRUE(bitwise_equal(F::pad(x, F::PadFuncOptions({1, 2, 2, 0}).mode(kReflect)), pad(x, {1, 2, 2, 0}, "reflect")));
  EXPECT_TRUE(bitwise_equal(F::pad(v, F::PadFuncOptions({1, 1, 2, 0}).value(3.0)), pad(v, {1, 1, 2, 0}, "constant", 3.0)));
  EXPECT_TRUE(bitwise_equal(F::interpolate(x, F::InterpolateFuncOptions().size(std::vector<int64_t>{9, 9}).mode(kBilinear).align_corners(true)),
                            interpolate(x, {9, 9}, {}, "bilinear", true)));
  EXPECT_TRUE(bitwise_equal(F::leaky_relu(v), where(v > 0.0, v, v * 0.01)));
  EXPECT_TRUE(bitwise_equal(F::hardtanh(v), clamp(v, -1.0, 1.0)));
  EXPECT_TRUE(bitwise_equal(F::relu6(v * 5.0), clamp(v * 5.0, 0.0, 6.0)));
  // F.normalize(a), F.normalize(a, p=1.0, dim=0)
  EXPECT_TRUE(allclose(F::normalize(lhs()), {0.2182178795337677, -0.4364357590675354, 0.8728715181350708,
                                             0.08058229833841324, 0.9669875502586365, -0.24174688756465912}));
  EXPECT_TRUE(allclose(F::normalize(lhs(), F::NormalizeFuncOptions().p(1.0).dim(0)),
                       {0.6666666865348816, -0.25, 0.7272727489471436, 0.3333333432674408, 0.75,
                        -0.27272728085517883}));
  EXPECT_THROW(F::leaky_relu(idx), TypeError);
  EXPECT_THROW(F::dropout(v, F::DropoutFuncOptions().p(-0.1)), ValueError);
}

}  // namespace
}  // namespace dtr
