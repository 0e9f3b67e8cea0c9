#include "core/op_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

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

// Attributes own their keys, so keys made at run time may go away.
TEST(Attrs, KeysBuiltFromRunTimeStringsOutliveThem) {
  Attrs a;
  {
    std::string dim = "di";
    dim += 'm';
    std::string long_key(40, 'k');  // beyond any inline buffer
    a.set(dim, int64_t{3});
    a.set(long_key, 2.5);
    dim.assign("xyz");
    long_key.assign(40, 'z');
  }
  std::vector<std::string> clobber(8, std::string(40, 'q'));  // reuse the freed memory
  EXPECT_EQ(a.i("dim"), 3);
  EXPECT_EQ(a.f(std::string(40, 'k')), 2.5);
  ASSERT_EQ(a.items().size(), 2u);
  EXPECT_EQ(a.items()[1].first, std::string(40, 'k'));
  EXPECT_EQ(a.str(), "dim=3, " + std::string(40, 'k') + "=2.5");
  const Attrs copy = a;
  a.set("dim", int64_t{4});
  EXPECT_EQ(copy.i("dim"), 3);
}

// Every declared key fits std::string's inline buffer: op attributes
// allocate nothing for their keys.
TEST(OpRegistry, EveryDeclaredKeyFitsTheSmallStringBuffer) {
  ensure_ops_registered();
  const size_t inline_capacity = std::string().capacity();
  for (const auto& d : OpRegistry::instance().ops()) {
    for (const ParamSpec& p : d->params) {
      EXPECT_LE(p.name.size(), inline_capacity) << d->name << "." << p.name;
      if (p.default_value.has_value()) {
        EXPECT_EQ(param_type_of(*p.default_value), p.type) << d->name << "." << p.name;
      }
    }
  }
}

}  // namespace
}  // namespace dtr
