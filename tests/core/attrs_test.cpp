// Attrs getters on attributes built by hand (OpRegistry's checking off).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/attrs.h"
#include "core/op_registry.h"
#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

TEST(Attrs, MissingIsAValueErrorAndWrongTypeATypeError) {
  const Attrs a{{"dim", int64_t{1}}, {"p", 0.5}};
  EXPECT_THAT(testing::error_message<ValueError>([&] { (void)a.i("keepdim"); }),
              ::testing::HasSubstr("missing attribute 'keepdim'"));
  EXPECT_THAT(testing::error_message<TypeError>([&] { (void)a.f("dim"); }),
              ::testing::HasSubstr("attribute 'dim' expects a value of type float, got int"));
  // The _or getters threw std::bad_variant_access for another type.
  EXPECT_THAT(testing::error_message<TypeError>([&] { (void)a.b_or("p", false); }),
              ::testing::HasSubstr("attribute 'p' expects a value of type bool, got float"));
  EXPECT_EQ(a.i("dim"), 1);
  EXPECT_EQ(a.f_or("p", 0.0), 0.5);
  EXPECT_EQ(a.b_or("absent", true), true);
}

// Found by tests/fuzz/fuzz_dispatch: randn dispatched with attributes built
// by hand and no "shape" threw InternalError ("please report").
TEST(Attrs, HandBuiltAttributesReachingAKernelAreTheCallersError) {
  const bool was = OpRegistry::check_attrs_enabled();
  OpRegistry::set_check_attrs(false);
  EXPECT_THROW((void)dispatch1(op("randn"), {}, Attrs{}), ValueError);
  EXPECT_THROW((void)dispatch1(op("randn"), {}, Attrs{{"shape", 2.0}}), TypeError);
  OpRegistry::set_check_attrs(was);
}

}  // namespace
}  // namespace dtr
