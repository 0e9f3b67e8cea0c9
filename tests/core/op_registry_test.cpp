#include "core/op_registry.h"

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "eager/dispatch.h"
#include "eager/ops.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Every op dispatched anywhere in the test binary is checked against its
// row's declared parameters: an undeclared, misspelled or mistyped attribute
// fails the test that dispatches it.
class CheckAttrsEverywhere : public ::testing::Environment {
 public:
  void SetUp() override { OpRegistry::set_check_attrs(true); }
};
[[maybe_unused]] ::testing::Environment* const kCheckAttrs =
    ::testing::AddGlobalTestEnvironment(new CheckAttrsEverywhere);

OpDef row(const char* name) {
  OpDef def;
  def.name = name;
  return def;
}

TEST(OpRegistry, ANameIsDefinedOnce) {
  OpRegistry registry;
  registry.define(row("a"));
  EXPECT_THROW(registry.define(row("a")), InternalError);
}

// eager/ops/init.cpp: a registration that throws part way takes its rows out
// again, so that the retry defines them afresh instead of failing with
// "defined twice".
TEST(OpRegistry, TruncateUndoesAPartialRegistration) {
  OpRegistry registry;
  registry.define(row("a"));
  registry.define(row("b"));
  registry.define(row("c"));
  registry.truncate(1);
  ASSERT_EQ(registry.ops().size(), 1u);
  EXPECT_NE(registry.find("a"), nullptr);
  EXPECT_EQ(registry.find("b"), nullptr);
  EXPECT_EQ(registry.define(row("b")).id, 1);
  EXPECT_EQ(registry.define(row("c")).id, 2);
  registry.truncate(5);  // beyond the end: nothing to undo
  EXPECT_EQ(registry.ops().size(), 3u);
  EXPECT_EQ(registry.find("c"), registry.ops()[2].get());
  EXPECT_EQ(&registry.get("b"), registry.ops()[1].get());
}

TEST(OpRegistry, KernelsBindByNameOnceAndNeverToACompositeRow) {
  OpRegistry registry;
  registry.define(row("p"));
  OpDef c = row("c");
  c.kind = OpKind::kComposite;
  registry.define(std::move(c));
  const KernelFn k = [](const KernelContext&) {};
  registry.set_kernel("p", kCPU, k);
  EXPECT_EQ(registry.get("p").kernels[size_t(kCPU)], k);
  EXPECT_THROW(registry.set_kernel("c", kCPU, k), InternalError);
  EXPECT_THROW(registry.set_kernel("nope", kCPU, k), InternalError);
}

TEST(OpRegistry, AParameterIsDeclaredOnce) {
  OpRegistry registry;
  OpDef d = row("a");
  d.params = {param::i("dim"), param::f("dim")};
  EXPECT_THROW(registry.define(std::move(d)), InternalError);
}

OpDef schema_row() {
  OpDef d = row("reduce_like");
  d.params = {param::ints("dims"), param::b("keepdim", false),
              param::optional(param::i("start", 0)), param::optional(param::f("min"))};
  return d;
}

TEST(OpDefCheckAttrs, AcceptsDeclaredParametersOfTheirTypes) {
  const OpDef d = schema_row();
  EXPECT_NO_THROW(d.check_attrs(Attrs{{"dims", Shape{0}}, {"keepdim", true}}));
  EXPECT_NO_THROW(d.check_attrs(Attrs{{"dims", Shape{0, 1}}, {"keepdim", false}, {"start", int64_t{2}},
                                      {"min", 0.5}}));
}

TEST(OpDefCheckAttrs, AnUnknownKeyIsAValueErrorNamingOpKeyAndParameters) {
  const OpDef d = schema_row();
  const std::string msg = testing::error_message<ValueError>(
      [&] { d.check_attrs(Attrs{{"dims", Shape{0}}, {"keepdims", true}}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("reduce_like"), HasSubstr("'keepdims'"),
                         HasSubstr("dims (ints), keepdim (bool), start (int), min (float)")));
}

TEST(OpDefCheckAttrs, AWrongTypeIsATypeErrorNamingExpectedAndActual) {
  const OpDef d = schema_row();
  const std::string msg = testing::error_message<TypeError>(
      [&] { d.check_attrs(Attrs{{"dims", Shape{0}}, {"keepdim", int64_t{1}}}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("reduce_like"), HasSubstr("'keepdim'"), HasSubstr("bool"),
                         HasSubstr("got int")));
}

TEST(OpDefCheckAttrs, AMissingRequiredParameterIsAValueError) {
  const OpDef d = schema_row();
  EXPECT_THAT(testing::error_message<ValueError>([&] { d.check_attrs(Attrs{{"keepdim", true}}); }),
              AllOf(HasSubstr("reduce_like"), HasSubstr("missing required parameter 'dims'")));
  // A required parameter with a default is still required once built.
  EXPECT_THAT(testing::error_message<ValueError>([&] { d.check_attrs(Attrs{{"dims", Shape{0}}}); }),
              HasSubstr("'keepdim'"));
}

TEST(OpDefMakeAttrs, FillsDefaultsAndChecksRunTimeNames) {
  const OpDef d = schema_row();
  std::vector<std::pair<std::string, AttrValue>> given;
  given.emplace_back(std::string("di") + "ms", Shape{1, 2});
  const Attrs a = d.make_attrs(given);
  EXPECT_EQ(a.ints("dims"), (Shape{1, 2}));
  EXPECT_FALSE(a.b("keepdim"));   // the declared default
  EXPECT_EQ(a.i("start"), 0);     // an optional parameter's default: what the kernel assumes
  EXPECT_FALSE(a.has("min"));     // optional without a default stays absent

  given.emplace_back("dims", Shape{3});
  EXPECT_THAT(testing::error_message<ValueError>([&] { d.make_attrs(given); }),
              HasSubstr("'dims' given twice"));
  given.pop_back();
  given.emplace_back("min", int64_t{3});
  EXPECT_THAT(testing::error_message<TypeError>([&] { d.make_attrs(given); }),
              AllOf(HasSubstr("'min'"), HasSubstr("float"), HasSubstr("got int")));
}

TEST(OpDefMakeAttrs, ARealRowBuildsTheAttributesItsCallerWould) {
  const OpDef& sum = op("sum");
  std::vector<std::pair<std::string, AttrValue>> given{{"dims", Shape{1}}};
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor y = dispatch1(sum, {x}, sum.make_attrs(given));
  EXPECT_TRUE(testing::bitwise_equal(y, dtr::sum(x, {1})));
  given.emplace_back("keepdims", true);
  EXPECT_THAT(testing::error_message<ValueError>([&] { sum.make_attrs(given); }),
              AllOf(HasSubstr("sum: unknown attribute 'keepdims'"), HasSubstr("keepdim (bool)")));
}

TEST(OpRegistry, DispatchChecksAttributesWhileCheckingIsOn) {
  ASSERT_TRUE(OpRegistry::check_attrs_enabled()) << "the test environment turns checking on";
  const OpDef& sum = op("sum");
  const Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3});
  EXPECT_THROW(dispatch1(sum, {x}, Attrs{{"dims", Shape{0}}, {"keepdims", false}}), ValueError);
  EXPECT_THROW(dispatch1(sum, {x}, Attrs{{"dims", Shape{0}}, {"keepdim", int64_t{0}}}), TypeError);
  EXPECT_THROW(dispatch1(sum, {x}, Attrs{{"keepdim", false}}), ValueError);
}

// Every row declares how many inputs it takes, so dispatch can refuse a
// wrong count before an infer function reads past its inputs.
TEST(OpRegistry, EveryRowDeclaresItsInputCount) {
  ensure_ops_registered();
  for (const auto& d : OpRegistry::instance().ops()) {
    if (d->name.starts_with("test_")) continue;  // rows the tests define
    EXPECT_GE(d->min_inputs, 0) << d->name;
    EXPECT_TRUE(d->max_inputs == -1 || d->max_inputs >= d->min_inputs) << d->name;
  }
}

TEST(OpRegistry, DispatchRefusesAWrongInputCountNamingTheOp) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  EXPECT_THAT(testing::error_message<ValueError>([&] { dispatch1(op("add"), {x}, Attrs{{"alpha", 1.0}}); }),
              HasSubstr("add: expected 2 inputs, got 1"));
  EXPECT_THAT(testing::error_message<ValueError>([&] { dispatch1(op("matmul"), std::span<const Tensor>()); }),
              HasSubstr("matmul: expected 2 inputs, got 0"));
  EXPECT_THAT(testing::error_message<ValueError>([&] { dispatch1(op("linear"), {x, x, x, x}); }),
              HasSubstr("linear: expected 2 to 3 inputs, got 4"));
  EXPECT_THAT(testing::error_message<ValueError>([&] { dispatch1(op("neg"), {x, x}); }),
              HasSubstr("neg: expected 1 input, got 2"));
  // Rows whose count depends on attributes check it before reading the inputs.
  const Tensor m = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Attrs ln{{"norm_shape", Shape{2}}, {"eps", 1e-5}, {"has_weight", true}, {"has_bias", true}};
  EXPECT_THAT(testing::error_message<ValueError>([&] { dispatch1(op("layer_norm"), {m}, ln); }),
              HasSubstr("layer_norm: expected 3 inputs, got 1"));
  const Attrs bn{{"eps", 1e-5}, {"has_weight", true}, {"has_bias", true}};
  EXPECT_THAT(testing::error_message<ValueError>([&] { dispatch1(op("batch_norm"), {m}, bn); }),
              HasSubstr("batch_norm: expected 3 inputs, got 1"));
}

// Attributes own their keys, so keys made at run time may go away.
TEST(Attrs, KeysBuiltFromRunTimeStringsOutliveThem) {
  Attrs a;
  {
    std::string dim = "di";
    dim += 'm';
    std::string long_key(AttrKey::kMaxSize, 'k');  // the longest name
    a.set(dim, int64_t{3});
    a.set(long_key, 2.5);
    dim.assign("xyz");
    long_key.assign(AttrKey::kMaxSize, 'z');
  }
  std::vector<std::string> clobber(8, std::string(40, 'q'));  // reuse the freed memory
  EXPECT_EQ(a.i("dim"), 3);
  const std::string k(AttrKey::kMaxSize, 'k');
  EXPECT_EQ(a.f(k), 2.5);
  ASSERT_EQ(a.items().size(), 2u);
  EXPECT_EQ(a.items()[1].first, k);
  EXPECT_EQ(a.str(), "dim=3, " + k + "=2.5");
  // A longer name is refused, naming it; nothing is added.
  EXPECT_THROW(a.set(std::string(AttrKey::kMaxSize + 1, 'n'), 1.0), ValueError);
  EXPECT_EQ(a.items().size(), 2u);
  const Attrs copy = a;
  a.set("dim", int64_t{4});
  EXPECT_EQ(copy.i("dim"), 3);
}

// Every declared key fits an AttrKey (its names are held inline).
TEST(OpRegistry, EveryDeclaredKeyFitsAnAttrKey) {
  ensure_ops_registered();
  for (const auto& d : OpRegistry::instance().ops()) {
    for (const ParamSpec& p : d->params) {
      EXPECT_LE(p.name.size(), AttrKey::kMaxSize) << d->name << "." << p.name;
      if (p.default_value.has_value()) {
        EXPECT_EQ(param_type_of(*p.default_value), p.type) << d->name << "." << p.name;
      }
    }
  }
}

// The scalar-work calibration of Note [scores], set on the rows: these rows
// and no others, with the values benchmarks/cost_model measured.
TEST(OpRegistry, ScalarWorkCalibrationLivesOnItsRows) {
  ensure_ops_registered();
  const std::map<std::string, double> calibrated = {
      {"randn", 2200}, {"rand", 600},           {"randint", 700},        {"dropout", 640},
      {"softmax", 380}, {"log_softmax", 380},   {"cross_entropy", 350},  {"gelu", 130},
      {"gelu_backward", 180}, {"silu", 80},     {"silu_backward", 110},  {"tanh", 120},
      {"sigmoid", 75}, {"exp", 75},             {"log", 75},             {"batch_norm", 90},
  };
  for (const auto& d : OpRegistry::instance().ops()) {
    const auto it = calibrated.find(d->name);
    EXPECT_EQ(d->scalar_flops_per_element, it == calibrated.end() ? 0.0 : it->second) << d->name;
  }
}

}  // namespace
}  // namespace dtr
