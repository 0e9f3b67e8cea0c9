// dtr::optim: SGD and AdamW against torch.optim (PyTorch 1.13, float64,
// three steps with fixed gradients; tests/eager/nn_reference.py), state_dict
// resume (bitwise), and argument errors.
#include <cstdio>

#include "dtr/dtr.h"
#include "tests/eager/optim_fixture.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using namespace optim_fixture;

TEST(OptimSGD, MatchesTorch) {
  {
    Params p;
    optim::SGD opt(p.list(), optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01));
    run(p, opt);
    EXPECT_TRUE(testing::allclose(p.p0, {-0.7926481111425001, -0.35466545458934995, -0.017725166411200005, 0.42025749014195}, 1e-14, 1e-13));
    EXPECT_TRUE(testing::allclose(p.p1, {-0.7926481111425001, -0.07490443779185, 0.5417968671838}, 1e-14, 1e-13));
  }
  {
    Params p;
    optim::SGD opt(p.list(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01).nesterov(true));
    run(p, opt);
    EXPECT_TRUE(testing::allclose(p.p0, {-0.87852901143075, -0.337847228512965, -0.08870200600768001, 0.45197977691010505}, 1e-14, 1e-13));
    EXPECT_TRUE(testing::allclose(p.p1, {-0.87852901143075, -0.00015244617771497548, 0.58668755866282}, 1e-14, 1e-12));
  }
  {
    Params p;
    optim::SGD opt(p.list(), optim::SGDOptions(0.5));
    run(p, opt);
    EXPECT_TRUE(testing::allclose(p.p0, {-1.0875, -0.30425, -0.25225, 0.531}, 1e-14, 1e-13));
    EXPECT_TRUE(testing::allclose(p.p1, {-1.0875, 0.17075, 0.69775}, 1e-14, 1e-13));
    EXPECT_TRUE(opt.state_dict().keys() ==
                (std::vector<std::string>{"param_groups.0.lr", "param_groups.0.momentum", "param_groups.0.dampening",
                                          "param_groups.0.weight_decay", "param_groups.0.nesterov",
                                          "param_groups.0.params"}));
  }
}

TEST(OptimAdamW, MatchesTorch) {
  {
    Params p;
    optim::AdamW opt(p.list(), optim::AdamWOptions(0.01).betas(std::make_tuple(0.9, 0.99)).eps(1e-8).weight_decay(0.1));
    run(p, opt);
    EXPECT_TRUE(testing::allclose(p.p0, {-0.7439685558725851, -0.36768978766601146, 0.0237237533391905, 0.4000025213452233}, 1e-14, 1e-12));
    EXPECT_TRUE(testing::allclose(p.p1, {-0.7439685558725851, -0.11843903824864392, 0.5146578661709248}, 1e-14, 1e-12));
    const StateDict s = opt.state_dict();
    EXPECT_EQ(s.at("state.0.step").item<int64_t>(), 3);
    EXPECT_EQ(s.at("state.1.step").item<int64_t>(), 3);
    EXPECT_TRUE(testing::allclose(s.at("state.0.exp_avg"), {0.06675, -0.012015, 0.053845, -0.02492}, 1e-15, 1e-12));
    EXPECT_TRUE(testing::allclose(s.at("state.1.exp_avg_sq"), {0.027844312500000024, 0.019960040725000017, 0.007723393525000007}, 1e-15, 1e-12));
    EXPECT_DOUBLE_EQ(s.at("param_groups.0.beta2").item<double>(), 0.99);
  }
  {
    Params p;
    optim::AdamW opt(p.list(), optim::AdamWOptions(0.01).betas(std::make_tuple(0.9, 0.99)).eps(1e-8).weight_decay(0.1).amsgrad(true));
    run(p, opt);
    EXPECT_TRUE(testing::allclose(p.p0, {-0.7439583649763529, -0.3676999785612866, 0.023733944235372374, 0.39999233044934374}, 1e-14, 1e-12));
    EXPECT_TRUE(testing::allclose(p.p1, {-0.7439583649763529, -0.1184492291448381, 0.5146476752748813}, 1e-14, 1e-12));
    EXPECT_TRUE(opt.state_dict().contains("state.1.max_exp_avg_sq"));
  }
  {
    Params p;
    optim::AdamW opt(p.list());  // lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2
    run(p, opt);
    EXPECT_TRUE(testing::allclose(p.p0, {-0.7495977790825596, -0.3653687712172091, 0.020379121146612538, 0.4046081289918569}, 1e-14, 1e-12));
    EXPECT_TRUE(testing::allclose(p.p1, {-0.7495977790825596, -0.11537627117555897, 0.5196046790204115}, 1e-14, 1e-12));
  }
  {
    // float32 parameters: same within float rounding.
    Params p(kFloat32);
    optim::AdamW opt(p.list(), optim::AdamWOptions(0.01));
    run(p, opt);
    EXPECT_EQ(p.p0.dtype(), kFloat32);
    EXPECT_TRUE(testing::allclose(p.p0, {-0.7459792494773865, -0.3686862289905548, 0.023789741098880768, 0.4010827839374542}, 1e-6, 1e-5));
    EXPECT_TRUE(testing::allclose(p.p1, {-0.7459792494773865, -0.11876123398542404, 0.5160481929779053}, 1e-6, 1e-5));
  }
}

TEST(OptimCommon, ZeroGradAndSkippedParameters) {
  Params p;
  optim::AdamW opt(p.list(), optim::AdamWOptions(0.1));
  set_grads(p, 0);
  opt.zero_grad();
  EXPECT_FALSE(p.p0.grad().defined());
  EXPECT_FALSE(p.p1.grad().defined());
  // Only p1 has a gradient: p0 keeps its value and gets no state.
  p.p1.set_grad(ones({3}, kFloat64));
  const auto before = p.p0.to_vector<double>();
  opt.step();
  EXPECT_EQ(p.p0.to_vector<double>(), before);
  const StateDict s = opt.state_dict();
  EXPECT_FALSE(s.contains("state.0.exp_avg"));
  EXPECT_EQ(s.at("state.1.step").item<int64_t>(), 1);
  // Step 1 with g = 1: p ← p(1 − lr·wd) − lr·1/(1 + eps).
  EXPECT_NEAR(p.p1.to_vector<double>()[0], -0.75 * (1 - 0.1 * 0.01) - 0.1 / (1 + 1e-8), 1e-12);

  // An optimizer step trains a real model: a gradient from backward.
  manual_seed(0);
  nn::Linear lin(2, 1);
  optim::SGD sgd(lin->parameters(), optim::SGDOptions(0.02));
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor y = from_vector(std::vector<float>{1, -1}, {2, 1});
  double first = 0, last = 0;
  for (int i = 0; i < 50; ++i) {
    sgd.zero_grad();
    Tensor loss = mse_loss(lin->forward(x), y);
    loss.backward();
    sgd.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first);
}

TEST(OptimCommon, ResumeFromStateDictIsBitwise) {
  for (bool adam : {false, true}) {
    Params a(kFloat32);
    std::unique_ptr<optim::Optimizer> oa;
    if (adam) oa = std::make_unique<optim::AdamW>(a.list(), optim::AdamWOptions(0.05).weight_decay(0.1));
    else oa = std::make_unique<optim::SGD>(a.list(), optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
    run(a, *oa, 0, 2);

    // A fresh run resumes from the saved parameters and optimizer state
    // (through a safetensors file), with different hyperparameters at first.
    const std::string path = ::testing::TempDir() + "/optim_resume.safetensors";
    save(path, oa->state_dict());
    Params b(kFloat32);
    {
      NoGradGuard ng;
      b.p0.copy_(a.p0);
      b.p1.copy_(a.p1);
    }
    std::unique_ptr<optim::Optimizer> ob;
    if (adam) ob = std::make_unique<optim::AdamW>(b.list(), optim::AdamWOptions(1.0));
    else ob = std::make_unique<optim::SGD>(b.list(), optim::SGDOptions(1.0).momentum(0.5));
    ob->load_state_dict(load(path));
    std::remove(path.c_str());
    EXPECT_EQ(ob->lr(), 0.05);

    run(a, *oa, 2, 3);
    run(b, *ob, 2, 3);
    EXPECT_TRUE(testing::bitwise_equal(a.p0, b.p0)) << (adam ? "AdamW" : "SGD");
    EXPECT_TRUE(testing::bitwise_equal(a.p1, b.p1)) << (adam ? "AdamW" : "SGD");
    // The loaded buffers are owned copies: the saved dict did not change.
    for (const auto& [k, t] : oa->state_dict()) {
      EXPECT_TRUE(testing::bitwise_equal(t, ob->state_dict().at(k))) << k;
    }
  }
}

TEST(OptimCommon, Errors) {
  Params p;
  EXPECT_THROW(optim::SGD(p.list(), optim::SGDOptions(-1)), ValueError);
  EXPECT_THROW(optim::SGD(p.list(), optim::SGDOptions(0.1).nesterov(true)), ValueError);
  EXPECT_THROW(optim::SGD(p.list(), optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)), ValueError);
  EXPECT_THROW(optim::AdamW(p.list(), optim::AdamWOptions().betas(std::make_tuple(1.0, 0.999))), ValueError);
  EXPECT_THROW(optim::AdamW(p.list(), optim::AdamWOptions().eps(-1)), ValueError);
  EXPECT_THROW(optim::AdamW(p.list(), optim::AdamWOptions().weight_decay(-0.1)), ValueError);
  EXPECT_THROW(optim::AdamW(std::vector<Tensor>{}), ValueError);
  EXPECT_THROW(optim::AdamW({ones({2})}), ValueError);  // does not require grad
  EXPECT_THROW(optim::AdamW({p.p0, p.p0}), ValueError);

  optim::AdamW opt(p.list());
  set_grads(p, 0);
  opt.step();
  const StateDict good = opt.state_dict();
  StateDict snapshot;
  for (const auto& [k, t] : good) snapshot.insert(k, t.clone());
  auto with = [&](const std::string& key, Tensor t) {
    StateDict s = good;
    s.insert(key, t);
    return s;
  };
  auto expect_message = [&](const StateDict& s, const std::string& part) {
    try {
      opt.load_state_dict(s);
      ADD_FAILURE() << "no error for " << part;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_message(with("state.0.exp_avg", ones({3}, kFloat64)), "state.0.exp_avg");
  expect_message(with("state.5.exp_avg", ones({3}, kFloat64)), "state.5.exp_avg");
  expect_message(with("momentum", ones({1}, kFloat64)), "momentum");
  expect_message(with("param_groups.0.lr", full({}, -1.0, kFloat64)), "learning rate");
  StateDict missing = good;
  missing.erase("param_groups.0.eps");
  expect_message(missing, "param_groups.0.eps");
  // Nothing changed after the failed loads.
  EXPECT_EQ(opt.lr(), 1e-3);
  for (const auto& [k, t] : snapshot) EXPECT_TRUE(testing::bitwise_equal(t, opt.state_dict().at(k))) << k;
}

}  // namespace
}  // namespace dtr
