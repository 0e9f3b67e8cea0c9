// dtr::optim parameter groups (libtorch's OptimizerParamGroup, param_groups(),
// add_param_group) and Adam, against torch.optim (PyTorch 1.13, float64,
// three steps with fixed gradients):
//   /usr/bin/python3 tests/eager/optim_groups_reference.py
// prints every golden below; the test never imports torch.
#include <memory>

#include "dtr/dtr.h"
#include "tests/eager/optim_fixture.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using optim::OptimizerParamGroup;

using namespace optim_fixture;

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol = 1e-12,
                  double atol = 1e-14) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << "element " << i;
  }
}

TEST(OptimGroups, PerGroupOptionsMatchTorch) {
  {
    // torch.optim.SGD([{'params': [p0]}, {'params': [p1], 'lr': 0.05, 'momentum': 0.5,
    // 'weight_decay': 0.0}], lr=0.1, momentum=0.9, weight_decay=0.01)
    Params p;
    std::vector<OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{p.p0});
    groups.emplace_back(std::vector<Tensor>{p.p1},
                        std::make_unique<optim::SGDOptions>(optim::SGDOptions(0.05).momentum(0.5)));
    optim::SGD opt(groups, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
    ASSERT_EQ(opt.param_groups().size(), 2u);
    EXPECT_EQ(opt.size(), 2u);
    EXPECT_DOUBLE_EQ(static_cast<optim::SGDOptions&>(opt.param_groups()[0].options()).weight_decay(), 0.01);
    run(p, opt);
    expect_close(p.values(), {-0.8201810242500001, -0.349564815135, -0.04011594351999999, 0.43050026559500004,
                              -0.7931250000000001, -0.07848750000000002, 0.5427125});
  }
  {
    // nanoGPT's configure_optimizers: decay on matrices only.
    // torch.optim.AdamW([{'params': [p0], 'weight_decay': 0.1}, {'params': [p1], 'weight_decay': 0.0}],
    // lr=0.01, betas=(0.9, 0.95))
    Params p;
    const auto base = optim::AdamWOptions(0.01).betas({0.9, 0.95});
    std::vector<OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{p.p0}, std::make_unique<optim::AdamWOptions>(
                                                       optim::AdamWOptions(base).weight_decay(0.1)));
    groups.emplace_back(std::vector<Tensor>{p.p1}, std::make_unique<optim::AdamWOptions>(
                                                       optim::AdamWOptions(base).weight_decay(0.0)));
    optim::AdamW opt(groups, base);
    run(p, opt);
    expect_close(p.values(), {-0.7439574448487254, -0.36770089868922107, 0.023734864363015994, 0.3999914103216032,
                              -0.7461888393384662, -0.11881116064769412, 0.5161888394071463});
  }
}

TEST(OptimAdam, MatchesTorch) {
  {
    Params p;  // torch.optim.Adam([p0, p1], lr=0.01, betas=(0.9, 0.99))
    optim::Adam opt({p.p0, p.p1}, optim::AdamOptions(0.01).betas({0.9, 0.99}));
    run(p, opt);
    expect_close(p.values(), {-0.7461999726999542, -0.3688000269525684, 0.023800027281764898, 0.40119997282798814,
                              -0.7461999726999542, -0.11880002728623214, 0.5161999727685057});
    const StateDict s = opt.state_dict();
    EXPECT_EQ(s.at("state.1.step").item<int64_t>(), 3);
    EXPECT_TRUE(s.contains("state.0.exp_avg_sq"));
    EXPECT_FALSE(s.contains("state.0.max_exp_avg_sq"));
  }
  {
    Params p;  // torch.optim.Adam([p0, p1], lr=0.01, betas=(0.9, 0.99), weight_decay=0.1, amsgrad=True)
    optim::Adam opt({p.p0, p.p1}, optim::AdamOptions(0.01).betas({0.9, 0.99}).weight_decay(0.1).amsgrad(true));
    run(p, opt);
    expect_close(p.values(), {-0.7448846817217035, -0.3656213314293509, 0.023759460536873212, 0.3992903358791718,
                              -0.7448846817217035, -0.11857208107986715, 0.5144623628966257});
    EXPECT_TRUE(opt.state_dict().contains("state.1.max_exp_avg_sq"));
  }
  {
    Params p;  // torch.optim.Adam([p0, p1]): lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0
    optim::Adam opt({p.p0, p.p1});
    EXPECT_DOUBLE_EQ(opt.options().weight_decay(), 0.0);
    run(p, opt);
    expect_close(p.values(), {-0.7496202625186957, -0.36537973744657287, 0.02037973747947699, 0.40462026253149314,
                              -0.7496202625186957, -0.11537973747992351, 0.5196202625255476});
  }
  {
    Params p(kFloat32);  // torch.optim.Adam([p0, p1], lr=0.01, weight_decay=0.05), float32
    optim::Adam opt({p.p0, p.p1}, optim::AdamOptions(0.01).weight_decay(0.05));
    run(p, opt);
    EXPECT_EQ(p.p0.dtype(), kFloat32);
    expect_close(p.values(), {-0.7455535531044006, -0.36711612343788147, 0.023771775886416435, 0.40026313066482544,
                              -0.7455535531044006, -0.1186770498752594, 0.515346884727478},
                 1e-5, 1e-6);
  }
  Params p;
  EXPECT_THROW(optim::Adam({p.p0}, optim::AdamOptions(-1)), ValueError);
  EXPECT_THROW(optim::Adam({p.p0}, optim::AdamOptions().betas({0.9, 1.0})), ValueError);
  EXPECT_THROW(optim::Adam({p.p0}, optim::AdamOptions().eps(-1)), ValueError);
  EXPECT_THROW(optim::Adam({p.p0}, optim::AdamOptions().weight_decay(-1)), ValueError);
}

TEST(OptimGroups, EditedOptionsTakeEffectAtTheNextStep) {
  // torch: before step 1, param_groups[0]['lr'] = 0.2, param_groups[1]['weight_decay'] = 0.3,
  // param_groups[1]['betas'] = (0.5, 0.9); Adam([{'params': [p0]}, {'params': [p1]}], lr=0.01).
  Params p;
  optim::Adam opt(std::vector<OptimizerParamGroup>{std::vector<Tensor>{p.p0}, std::vector<Tensor>{p.p1}},
                  optim::AdamOptions(0.01));
  run(p, opt, 0, 3, [&](int k) {
    if (k != 1) return;
    static_cast<optim::AdamOptions&>(opt.param_groups()[0].options()).lr(0.2);
    auto& second = static_cast<optim::AdamOptions&>(opt.param_groups()[1].options());
    second.weight_decay(0.3).betas({0.5, 0.9});
  });
  expect_close(p.values(), {-0.8640525012058227, -0.2509475033886438, -0.09405250096410608, 0.5190524995129138,
                            -0.7509074482221927, -0.11177211125864414, 0.5201379648867693});
  // The defaults are the constructor's; editing a group does not change them.
  EXPECT_DOUBLE_EQ(opt.options().lr(), 0.01);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options().get_lr(), 0.2);
  // An invalid edit is refused at the next step, naming the value.
  static_cast<optim::AdamOptions&>(opt.param_groups()[1].options()).betas({0.9, 1.5});
  try {
    opt.step();
    ADD_FAILURE() << "no error for beta2 = 1.5";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("beta parameter at index 1"), std::string::npos) << e.what();
  }
  // set_lr sets every group's; lr() reads the first's.
  opt.set_lr(0.5);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].options().get_lr(), 0.5);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.5);
}

TEST(OptimGroups, AddParamGroupMatchesTorch) {
  // torch: SGD([p0], lr=0.1, momentum=0.9); add_param_group({'params': [p1], 'lr': 0.3, 'nesterov': True})
  Params p;
  optim::SGD opt(std::vector<Tensor>{p.p0}, optim::SGDOptions(0.1).momentum(0.9));
  auto options = std::make_unique<optim::SGDOptions>(opt.options());
  options->lr(0.3).nesterov(true);
  opt.add_param_group(OptimizerParamGroup({p.p1}, std::move(options)));
  EXPECT_EQ(opt.params().size(), 2u);
  run(p, opt);
  expect_close(p.values(), {-0.82425, -0.351635, -0.039895, 0.43272, -1.152975, 0.22618549999999993, 0.7322335});

  // Refused, and nothing changes: a parameter already optimized, options of
  // another optimizer, invalid options.
  Params q;
  EXPECT_THROW(opt.add_param_group(OptimizerParamGroup({q.p0, p.p1})), ValueError);
  EXPECT_THROW(opt.add_param_group(OptimizerParamGroup({q.p0}, std::make_unique<optim::AdamOptions>())), TypeError);
  EXPECT_THROW(opt.add_param_group(OptimizerParamGroup({q.p0}, std::make_unique<optim::SGDOptions>(-1.0))),
               ValueError);
  EXPECT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.params().size(), 2u);
  // A group without options gets the defaults.
  opt.add_param_group(OptimizerParamGroup({q.p0}));
  EXPECT_DOUBLE_EQ(opt.param_groups()[2].options().get_lr(), 0.1);
  // A group's parameter list is fixed once added.
  opt.param_groups()[2].params().push_back(q.p1);
  EXPECT_THROW(opt.step(), ValueError);
}

TEST(OptimGroups, StateDictRoundTripWithGroups) {
  auto make = [](Params& p) {
    std::vector<OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{p.p0},
                        std::make_unique<optim::AdamWOptions>(optim::AdamWOptions(0.02).weight_decay(0.1)));
    groups.emplace_back(std::vector<Tensor>{p.p1});
    return std::make_unique<optim::AdamW>(groups, optim::AdamWOptions(0.01).weight_decay(0.0).amsgrad(true));
  };
  Params straight;
  auto a = make(straight);
  run(straight, *a);

  Params resumed;
  auto b = make(resumed);
  run(resumed, *b, 0, 1);
  const StateDict s = b->state_dict();
  EXPECT_EQ(s.at("param_groups.0.params").to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(s.at("param_groups.1.params").to_vector<int64_t>(), (std::vector<int64_t>{1}));
  EXPECT_DOUBLE_EQ(s.at("param_groups.0.lr").item<double>(), 0.02);
  EXPECT_DOUBLE_EQ(s.at("param_groups.1.lr").item<double>(), 0.01);
  StateDict saved;  // owned copies
  for (const auto& [k, t] : s) saved.insert(k, t.clone());
  // A fresh optimizer with other options: the load brings every group's back.
  Params other;
  other.p0.detach().copy_(resumed.p0.detach());
  other.p1.detach().copy_(resumed.p1.detach());
  optim::AdamW c(std::vector<OptimizerParamGroup>{std::vector<Tensor>{other.p0}, std::vector<Tensor>{other.p1}},
                 optim::AdamWOptions(1.0));
  c.load_state_dict(saved);
  EXPECT_DOUBLE_EQ(c.param_groups()[0].options().get_lr(), 0.02);
  EXPECT_TRUE(static_cast<optim::AdamWOptions&>(c.param_groups()[1].options()).amsgrad());
  run(other, c, 1, 3);
  EXPECT_TRUE(testing::bitwise_equal(other.p0, straight.p0));
  EXPECT_TRUE(testing::bitwise_equal(other.p1, straight.p1));

  // Group count and sizes must match, as PyTorch's.
  Params d;
  optim::AdamW one_group(std::vector<Tensor>{d.p0, d.p1});
  EXPECT_THROW(one_group.load_state_dict(saved), ValueError);
  optim::AdamW swapped(std::vector<OptimizerParamGroup>{std::vector<Tensor>{}, std::vector<Tensor>{d.p0, d.p1}});
  EXPECT_THROW(swapped.load_state_dict(saved), ValueError);
  // The one-group form without "params" lists still loads.
  StateDict legacy = one_group.state_dict();
  legacy.erase("param_groups.0.params");
  one_group.load_state_dict(legacy);
}

TEST(OptimGroups, SchedulersSetEveryGroup) {
  Params p;
  optim::SGD opt(std::vector<OptimizerParamGroup>{
                     std::vector<Tensor>{p.p0},
                     OptimizerParamGroup({p.p1}, std::make_unique<optim::SGDOptions>(0.01))},
                 optim::SGDOptions(0.1));
  optim::StepLR sched(opt, /*step_size=*/2, /*gamma=*/0.5);
  for (int k = 0; k < 4; ++k) {
    set_grads(p, 0);
    opt.step();
    sched.step();
  }
  // Four steps of step_size 2: gamma applied twice to each group's own base.
  EXPECT_EQ(sched.base_lrs(), (std::vector<double>{0.1, 0.01}));
  const std::vector<double> lrs = sched.get_last_lr();
  ASSERT_EQ(lrs.size(), 2u);
  EXPECT_DOUBLE_EQ(lrs[0], 0.1 * 0.5 * 0.5);
  EXPECT_DOUBLE_EQ(lrs[1], 0.01 * 0.5 * 0.5);
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].options().get_lr(), lrs[1]);
}

TEST(OptimGroups, ZeroGradAndClosure) {
  Params p;
  optim::SGD opt({p.p0, p.p1}, 0.1);
  set_grads(p, 0);
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(p.p0.grad().defined());
  EXPECT_EQ(p.p0.grad().to_vector<double>(), (std::vector<double>(4, 0.0)));
  // step(closure): the closure runs with grad mode on and its loss comes back.
  NoGradGuard no_grad;
  const Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = sum(mul(p.p0, p.p0));
    l.backward();
    return l;
  });
  ASSERT_TRUE(loss.defined());
  EXPECT_TRUE(p.p0.grad().defined());
  EXPECT_FALSE(is_grad_enabled());
}

}  // namespace
}  // namespace dtr
