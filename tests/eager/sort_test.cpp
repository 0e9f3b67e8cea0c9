// sort and topk: the order of ties (the lower index first, both directions),
// NaN as the largest value, layouts along inner dims, 0-d inputs, gradients
// scattered back to the indices, independence from the thread count and from
// rematerialization, and typed errors. Values without ties are checked
// against PyTorch by the conformance harness.
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using Ints = std::vector<int64_t>;

TEST(Sort, TiesKeepTheLowerIndexFirst) {
  const Tensor x = from_vector(std::vector<double>{2, 1, 2, 1, 2});
  auto [v, i] = sort(x);
  EXPECT_TRUE(testing::allclose(v, {1, 1, 2, 2, 2}, 0));
  EXPECT_EQ(i.to_vector<int64_t>(), (Ints{1, 3, 0, 2, 4}));
  auto [vd, id] = sort(x, 0, true);
  EXPECT_TRUE(testing::allclose(vd, {2, 2, 2, 1, 1}, 0));
  EXPECT_EQ(id.to_vector<int64_t>(), (Ints{0, 2, 4, 1, 3}));
  EXPECT_EQ(std::get<1>(topk(x, 2)).to_vector<int64_t>(), (Ints{0, 2}));
  EXPECT_EQ(std::get<1>(topk(x, 3, 0, false)).to_vector<int64_t>(), (Ints{1, 3, 0}));
  EXPECT_EQ(std::get<1>(x.topk(4, -1, true, false)).to_vector<int64_t>(), (Ints{0, 2, 4, 1}));
}

TEST(Sort, NaNIsTheLargestValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector(std::vector<double>{1, nan, 3});
  // torch.topk(x, 2) == (nan, 3), (1, 2); largest=False gives (1, 3), (0, 2).
  auto [v, i] = topk(x, 2);
  EXPECT_TRUE(testing::allclose(v, {nan, 3}, 0));
  EXPECT_EQ(i.to_vector<int64_t>(), (Ints{1, 2}));
  auto [vs, is] = topk(x, 2, 0, false);
  EXPECT_TRUE(testing::allclose(vs, {1, 3}, 0));
  EXPECT_EQ(is.to_vector<int64_t>(), (Ints{0, 2}));
  // torch.sort(x, descending=True) == (nan, 3, 1), (1, 2, 0).
  EXPECT_EQ(std::get<1>(sort(x, 0, true)).to_vector<int64_t>(), (Ints{1, 2, 0}));
  EXPECT_EQ(std::get<1>(sort(x)).to_vector<int64_t>(), (Ints{0, 2, 1}));
}

TEST(Sort, AlongAnInnerDimAndOtherDtypes) {
  const Tensor x = from_vector(std::vector<double>{1, 6, 5, 2, 3, 4}, {3, 2});
  auto [v, i] = topk(x, 2, 0);
  EXPECT_EQ(v.shape(), (Shape{2, 2}));
  EXPECT_TRUE(testing::allclose(v, {5, 6, 3, 4}, 0));
  EXPECT_EQ(i.to_vector<int64_t>(), (Ints{1, 0, 2, 2}));
  auto [sv, si] = x.sort(0);
  EXPECT_TRUE(testing::allclose(sv, {1, 2, 3, 4, 5, 6}, 0));
  EXPECT_EQ(si.to_vector<int64_t>(), (Ints{0, 1, 2, 2, 1, 0}));
  // A transposed (non-contiguous) input.
  EXPECT_EQ(std::get<1>(sort(transpose(x, 0, 1), 1)).to_vector<int64_t>(), (Ints{0, 2, 1, 1, 2, 0}));
  // int64 and bool keep their dtype; torch.sort(torch.tensor([True, False])) == (F, T), (1, 0).
  auto [iv, ii] = topk(from_vector(std::vector<int64_t>{3, 1, 2}), 2);
  EXPECT_EQ(iv.dtype(), kInt64);
  EXPECT_EQ(iv.to_vector<int64_t>(), (Ints{3, 2}));
  EXPECT_EQ(ii.to_vector<int64_t>(), (Ints{0, 2}));
  auto [bv, bi] = sort(from_vector(std::vector<bool>{true, false}));
  EXPECT_EQ(bv.dtype(), kBool);
  EXPECT_EQ(bv.to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(bi.to_vector<int64_t>(), (Ints{1, 0}));
  // torch.topk refuses bool: "topk_cpu" not implemented for 'Bool'.
  EXPECT_TRUE(testing::throws_with<TypeError>([] { (void)topk(from_vector(std::vector<bool>{true, false}), 1); },
                                              {"topk", "not implemented for 'Bool'"}));
  // k = 0 and empty lines.
  EXPECT_EQ(std::get<0>(topk(x, 0, 1)).shape(), (Shape{3, 0}));
  EXPECT_EQ(std::get<1>(topk(zeros({3, 0}), 0, 1)).shape(), (Shape{3, 0}));
}

TEST(Sort, ZeroDimInputs) {
  // torch.topk(torch.tensor(2.), 1) == (2., 0), 0-d; also for k = 0.
  const Tensor s = full({}, 2.0, kFloat64);
  for (int64_t k : {0, 1}) {
    auto [v, i] = topk(s, k);
    EXPECT_EQ(v.dim(), 0);
    EXPECT_EQ(v.item<double>(), 2.0);
    EXPECT_EQ(i.item<int64_t>(), 0);
  }
  auto [v, i] = sort(s, 0);
  EXPECT_EQ(v.item<double>(), 2.0);
  EXPECT_EQ(i.item<int64_t>(), 0);
  Tensor g = full({}, 3.0, kFloat64);
  g.requires_grad_();
  mul(std::get<0>(topk(g, 1)), 5.0).backward();
  EXPECT_EQ(g.grad().item<double>(), 5.0);
}

TEST(Sort, GradientsScatterToTheIndices) {
  Tensor x = from_vector(std::vector<double>{3, 1, 2, 0, 5, 4}, {2, 3});
  x.requires_grad_();
  std::get<0>(topk(x, 2)).backward(from_vector(std::vector<double>{1, 10, 100, 1000}, {2, 2}));
  EXPECT_TRUE(testing::allclose(x.grad(), {1, 0, 10, 0, 100, 1000}, 0));
  Tensor y = from_vector(std::vector<double>{3, 1, 2});
  y.requires_grad_();
  std::get<0>(sort(y)).backward(from_vector(std::vector<double>{1, 2, 3}));
  EXPECT_TRUE(testing::allclose(y.grad(), {3, 1, 2}, 0));
  // Tied values: each selected index gets its own gradient.
  Tensor z = from_vector(std::vector<double>{1, 1, 1});
  z.requires_grad_();
  std::get<0>(topk(z, 2)).backward(from_vector(std::vector<double>{4, 5}));
  EXPECT_TRUE(testing::allclose(z.grad(), {4, 5, 0}, 0));
}

/// Many ties (values in {0, ..., 4}) over long lines.
Tensor tied_rows() {
  std::vector<float> v(64 * 300);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7919) % 5);
  return from_vector(v, {64, 300});
}

TEST(Sort, TieOrderDoesNotDependOnThreadsOrRematerialization) {
  const Tensor x = tied_rows();
  const int saved = num_threads();
  set_num_threads(1);
  auto [v1, i1] = topk(x, 40, 1);
  auto [sv1, si1] = sort(x, 1, true);
  set_num_threads(4);
  auto [v4, i4] = topk(x, 40, 1);
  auto [sv4, si4] = sort(x, 1, true);
  set_num_threads(saved);
  EXPECT_TRUE(testing::bitwise_equal(i1, i4));
  EXPECT_TRUE(testing::bitwise_equal(si1, si4));
  // The stable order: in each row, equal values appear in increasing index.
  const auto idx = si1.to_vector<int64_t>();
  const auto val = sv1.to_vector<float>();
  for (size_t r = 0; r < 64; ++r)
    for (size_t j = 1; j < 300; ++j)
      if (val[r * 300 + j] == val[r * 300 + j - 1]) {
        ASSERT_LT(idx[r * 300 + j - 1], idx[r * 300 + j]);
      }
  // topk is the prefix of the descending stable sort.
  const auto ti = i1.to_vector<int64_t>();
  for (size_t r = 0; r < 64; ++r)
    for (size_t j = 0; j < 40; ++j) ASSERT_EQ(ti[r * 40 + j], idx[r * 300 + j]);

  // Rematerialized under a budget, topk selects the same indices (MoE routing).
  const Tensor y = mul(x, 1.0);  // evictable: a computed tensor
  auto [rv, ri] = topk(y, 40, 1);
  const Tensor expected = from_vector(ri.to_vector<int64_t>(), {64, 40});
  remat::set_memory_budget(Device(kCPU), 1);
  remat::set_memory_budget(Device(kCPU), std::nullopt);
  EXPECT_TRUE(testing::bitwise_equal(ri, expected));
}

TEST(Sort, ErrorsAreTyped) {
  const Tensor x = zeros({3, 4});
  // torch: "selected index k out of range".
  EXPECT_THROW((void)topk(x, 5), IndexError);
  EXPECT_THROW((void)topk(x, -1), IndexError);
  EXPECT_THROW((void)topk(x, 4, 0), IndexError);
  EXPECT_THROW((void)topk(full({}, 1.0), 2), IndexError);
  // torch: "Dimension out of range" (IndexError).
  EXPECT_THROW((void)topk(x, 1, 2), IndexError);
  EXPECT_THROW((void)sort(x, 2), IndexError);
  EXPECT_THROW((void)sort(x, -3), IndexError);
  EXPECT_NE(testing::error_message([&] { (void)topk(x, 5); }).find("topk"), std::string::npos);
}

}  // namespace
}  // namespace dtr
