// Typed errors that name what was wrong: autograd's refusals (AutogradError;
// PyTorch raises RuntimeError for both, as dtr's Python binding does) of a
// saved tensor modified in place before backward and of a second backward
// through a graph whose saved tensors were freed; and a shape with too many
// elements, naming the op.
#include <string>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

TEST(TypedErrors, ASavedTensorModifiedInPlaceIsAnAutogradError) {
  Tensor x = from_vector<float>({1, 2, 3}).requires_grad_();
  Tensor y = x * 2.0;
  Tensor z = y * y;  // saves y
  {
    NoGradGuard ng;
    y.add_(1.0);
  }
  const std::string msg = testing::error_message<AutogradError>([&] { z.sum().backward(); });
  EXPECT_NE(msg.find("modified by an inplace operation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is at version 1; expected version 0"), std::string::npos) << msg;
}

TEST(TypedErrors, ASecondBackwardThroughAFreedGraphIsAnAutogradError) {
  Tensor x = from_vector<float>({1, 2}).requires_grad_();
  Tensor loss = (x * x).sum();
  loss.backward();
  const std::string msg = testing::error_message<AutogradError>([&] { loss.backward(); });
  EXPECT_NE(msg.find("backward through the graph a second time"), std::string::npos) << msg;
  EXPECT_NE(msg.find("retain_graph=true"), std::string::npos) << msg;
}

// "too many elements" names the op whose shape overflowed.
TEST(TypedErrors, TooManyElementsNamesTheOp) {
  const int64_t big = int64_t(1) << 31;
  Tensor x = zeros({1, 1});
  EXPECT_TRUE(testing::throws_with<ValueError>([&] { (void)x.expand({big, big}); },
                                               {"expand: shape [2147483648, 2147483648] has too many elements"}));
  EXPECT_TRUE(testing::throws_with<ValueError>([&] { (void)x.repeat({big, big}); }, {"repeat: shape"}));
  EXPECT_TRUE(testing::throws_with<ValueError>([&] { (void)zeros({big, big}); }, {": shape", "too many elements"}));
  // Outside any op, the message is the shape's alone.
  EXPECT_TRUE(testing::throws_with<ValueError>([&] { (void)numel({big, big}); }, {"shape [2147483648, 2147483648]"}));
}

}  // namespace
}  // namespace dtr
