// Views: shapes, strides and storage offsets match PyTorch (values pasted
// from torch 1.13), views share storage with their base, reshape copies only
// when it must, typed errors, and float64 gradient checks.
#include <string>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

/// 0, 1, ..., n-1 as float32 of `shape`.
Tensor iota(IntList shape) { return reshape(arange(numel(shape), kFloat32), shape); }

std::vector<double> range(double n) {
  std::vector<double> v;
  for (double i = 0; i < n; ++i) v.push_back(i);
  return v;
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.storage().get() == b.storage().get(); }

using testing::throws_with;

TEST(ViewOps, ViewSharesStorageAndInfersMinusOne) {
  Tensor x = iota({24});
  Tensor v = x.view({2, 3, 4});
  EXPECT_EQ(v.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(v.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(v.storage_offset(), 0);
  EXPECT_TRUE(shares_storage(x, v));
  EXPECT_EQ(x.view({4, -1}).shape(), (Shape{4, 6}));
  EXPECT_EQ(x.view({-1}).shape(), (Shape{24}));
  EXPECT_EQ(view(from_vector(std::vector<float>{7}), {}).dim(), 0);
  EXPECT_EQ(view(full({}, 2.0), {1, 1}).strides(), (Strides{1, 1}));
  EXPECT_TRUE(testing::allclose(v, range(24)));
}

TEST(ViewOps, ViewErrorsNameBothShapes) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(throws_with<ValueError>([&] { x.view({4, 2}); }, {"view", "[4, 2]", "[2, 3]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.view({-1, -1}); }, {"view", "only one dimension"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.view({-1, 4}); }, {"view", "[-1, 4]", "[2, 3]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.view({3, -2}); }, {"view", "invalid shape dimension -2"}));
  EXPECT_THROW(zeros({0, 3}).view({-1, 0}), ValueError);  // -1 would be ambiguous
  // A transposed tensor cannot be flattened without a copy.
  EXPECT_TRUE(throws_with<ValueError>([&] { x.t().view({6}); }, {"view", "[6]", "[3, 2]", "reshape"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { reshape(x, {5}); }, {"reshape", "[5]", "[2, 3]"}));
}

TEST(ViewOps, ViewOfNonContiguousWhenStridesAllow) {
  Tensor x = iota({2, 3, 4});
  Tensor t = x.transpose(0, 1);  // torch: (4, 12, 1)
  EXPECT_EQ(t.strides(), (Strides{4, 12, 1}));
  Tensor v = t.view({3, 2, 2, 2});  // torch: (4, 12, 2, 1), offset 0
  EXPECT_EQ(v.strides(), (Strides{4, 12, 2, 1}));
  EXPECT_TRUE(shares_storage(x, v));
  EXPECT_TRUE(testing::allclose(v, {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9,
                                    10, 11, 20, 21, 22, 23}));
}

TEST(ViewOps, ReshapeCopiesOnlyWhenItMust) {
  Tensor x = iota({2, 3, 4});
  Tensor r = reshape(x, {6, -1});
  EXPECT_TRUE(shares_storage(x, r));
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  Tensor nc = x.transpose(0, 1);
  Tensor c = nc.reshape({6, 4});
  EXPECT_FALSE(shares_storage(x, c));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TRUE(testing::allclose(c, {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9,
                                    10, 11, 20, 21, 22, 23}));
  // Viewable non-contiguous input: still a view.
  EXPECT_TRUE(shares_storage(x, nc.reshape({3, 2, 2, 2})));
}

TEST(ViewOps, TransposeAndPermuteStrides) {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});  // torch: shape [4, 2, 3], strides (1, 12, 4)
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  EXPECT_TRUE(shares_storage(x, p));
  EXPECT_TRUE(testing::allclose(p, {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21,
                                    2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(x.permute({-1, 0, 1}).strides(), (Strides{1, 12, 4}));
  Tensor t = transpose(x, -1, 0);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Strides{1, 4, 12}));
  EXPECT_EQ(iota({2, 3}).t().strides(), (Strides{1, 3}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.transpose(0, 3); }, {"transpose", "3"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.permute({0, 1}); }, {"permute", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.permute({0, 1, 1}); }, {"permute", "repeated"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.permute({0, 1, 5}); }, {"permute"}));
}

TEST(ViewOps, SliceFollowsPythonSemantics) {
  Tensor a = iota({10});
  Tensor s = a.slice(0, 2, 8, 3);  // torch: [2, 5], stride 3, offset 2
  EXPECT_TRUE(testing::allclose(s, {2, 5}));
  EXPECT_EQ(s.strides(), (Strides{3}));
  EXPECT_EQ(s.storage_offset(), 2);
  EXPECT_TRUE(shares_storage(a, s));
  EXPECT_TRUE(testing::allclose(a.slice(0, -3, std::nullopt), {7, 8, 9}));
  EXPECT_TRUE(testing::allclose(a.slice(0, -4, -1), {6, 7, 8}));
  EXPECT_EQ(a.slice(0, -100, 100).shape(), (Shape{10}));  // clamped
  Tensor empty = a.slice(0, 5, 2);                         // end < start: empty at offset 5
  EXPECT_EQ(empty.shape(), (Shape{0}));
  EXPECT_EQ(empty.storage_offset(), 5);
  EXPECT_EQ(a.slice(0, std::nullopt, std::nullopt, 4).shape(), (Shape{3}));

  Tensor x = iota({2, 3, 4});
  Tensor m = x.slice(1, 1, std::nullopt).slice(2, std::nullopt, std::nullopt, 2);  // x[:, 1:, ::2]
  EXPECT_EQ(m.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(m.strides(), (Strides{12, 4, 2}));
  EXPECT_EQ(m.storage_offset(), 4);
  EXPECT_TRUE(testing::allclose(m, {4, 6, 8, 10, 16, 18, 20, 22}));

  EXPECT_TRUE(throws_with<ValueError>([&] { a.slice(0, 0, 5, 0); }, {"slice", "step"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { a.slice(1, 0, 5); }, {"slice"}));
  EXPECT_THROW(full({}, 1.0).slice(0, 0, 1), IndexError);
}

TEST(ViewOps, NarrowAndSelect) {
  Tensor x = iota({2, 3, 4});
  Tensor n = x.narrow(2, -3, 2);  // torch: strides (12, 4, 1), offset 1
  EXPECT_EQ(n.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(n.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_TRUE(shares_storage(x, n));
  EXPECT_TRUE(testing::allclose(n, {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.narrow(2, 3, 2); }, {"narrow", "3", "2", "4"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.narrow(2, 5, 0); }, {"narrow", "5"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.narrow(2, 0, -1); }, {"narrow", "length"}));

  Tensor s = x.select(1, -1);  // torch: shape [2, 4], strides (12, 1), offset 8
  EXPECT_EQ(s.shape(), (Shape{2, 4}));
  EXPECT_EQ(s.strides(), (Strides{12, 1}));
  EXPECT_EQ(s.storage_offset(), 8);
  EXPECT_TRUE(testing::allclose(s, {8, 9, 10, 11, 20, 21, 22, 23}));
  Tensor s2 = x.select(2, 1);  // torch x[:, :, 1]: strides (12, 4), offset 1
  EXPECT_EQ(s2.strides(), (Strides{12, 4}));
  EXPECT_EQ(s2.storage_offset(), 1);
  EXPECT_EQ(iota({3}).select(0, 2).dim(), 0);
  EXPECT_EQ(iota({3}).select(0, 2).item<float>(), 2.0f);
  EXPECT_TRUE(throws_with<IndexError>([&] { x.select(1, 3); }, {"select", "3", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.select(1, -4); }, {"select", "-4"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.select(3, 0); }, {"select"}));
  EXPECT_THROW(full({}, 1.0).select(0, 0), IndexError);
}

TEST(ViewOps, UnsqueezeSqueezeStridesMatchTorch) {
  Tensor u = iota({2, 3, 4}).transpose(1, 2);  // shape [2, 4, 3], strides (12, 1, 4)
  EXPECT_EQ(u.unsqueeze(0).strides(), (Strides{24, 12, 1, 4}));
  EXPECT_EQ(u.unsqueeze(1).strides(), (Strides{12, 4, 1, 4}));
  EXPECT_EQ(u.unsqueeze(2).strides(), (Strides{12, 1, 12, 4}));
  EXPECT_EQ(u.unsqueeze(3).strides(), (Strides{12, 1, 4, 1}));
  EXPECT_EQ(u.unsqueeze(-1).shape(), (Shape{2, 4, 3, 1}));
  EXPECT_EQ(full({}, 1.0).unsqueeze(0).strides(), (Strides{1}));
  EXPECT_TRUE(throws_with<IndexError>([&] { u.unsqueeze(5); }, {"unsqueeze"}));

  Tensor y = zeros({3, 1, 4, 1});
  EXPECT_EQ(y.squeeze().shape(), (Shape{3, 4}));
  EXPECT_EQ(y.squeeze().strides(), (Strides{4, 1}));
  EXPECT_EQ(y.squeeze(1).strides(), (Strides{4, 1, 1}));
  EXPECT_EQ(y.squeeze(-1).shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(y.squeeze(0).shape(), (Shape{3, 1, 4, 1}));  // size 3: unchanged
  EXPECT_TRUE(shares_storage(y, y.squeeze()));
  EXPECT_EQ(full({}, 1.0).squeeze(0).dim(), 0);
  EXPECT_TRUE(throws_with<IndexError>([&] { y.squeeze(4); }, {"squeeze"}));
}

TEST(ViewOps, ExpandUsesZeroStrides) {
  Tensor e = from_vector(std::vector<float>{1, 2, 3}, {3, 1});
  Tensor x = e.expand({2, 3, 5});  // torch: strides (0, 1, 0)
  EXPECT_EQ(x.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(x.strides(), (Strides{0, 1, 0}));
  EXPECT_TRUE(shares_storage(e, x));
  EXPECT_EQ(e.expand({-1, 4}).strides(), (Strides{1, 0}));
  EXPECT_EQ(e.expand({1, 3, 1}).strides(), (Strides{3, 1, 1}));
  EXPECT_TRUE(testing::allclose(e.expand({3, 2}), {1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(full({}, 1.0).expand({3, 1}).strides(), (Strides{0, 0}));
  EXPECT_TRUE(throws_with<ValueError>([&] { e.expand({3, 4}).expand({2, 4}); },
                                      {"expand", "[2, 4]", "[3, 4]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { e.expand({5}); }, {"expand", "[5]", "[3, 1]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { e.expand({-1, 3, 1}); }, {"expand", "-1"}));
}

TEST(ViewOps, Flatten) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.flatten().shape(), (Shape{24}));
  EXPECT_EQ(x.flatten(0, 1).strides(), (Strides{4, 1}));
  EXPECT_TRUE(shares_storage(x, x.flatten(1)));
  Tensor t = x.transpose(0, 2).flatten(1);  // torch: shape [4, 6], a copy
  EXPECT_EQ(t.shape(), (Shape{4, 6}));
  EXPECT_FALSE(shares_storage(x, t));
  EXPECT_TRUE(testing::allclose(t, {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21,
                                    2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23}));
  EXPECT_EQ(full({}, 1.0).flatten().shape(), (Shape{1}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.flatten(2, 1); }, {"flatten"}));
  EXPECT_THROW(x.flatten(0, 3), IndexError);
}

TEST(ViewOps, WritesThroughViewsReachTheBase) {
  Tensor base = zeros({3, 4});
  base.select(0, 1).fill_(5);
  base.slice(1, 0, std::nullopt, 2).select(0, 2).fill_(7);  // base[2, ::2] = 7
  base.t().select(0, 3).copy_(from_vector(std::vector<float>{1, 2, 3}));  // column 3
  EXPECT_TRUE(testing::allclose(base, {0, 0, 0, 1, 5, 5, 5, 2, 7, 0, 7, 3}));
  // expand + view + permute of the same storage see the writes too.
  EXPECT_TRUE(testing::allclose(base.view({2, 6}).permute({1, 0}).select(0, 3), {1, 0}));
}

TEST(ViewOps, ViewsOfIntegerTensors) {
  Tensor x = arange(6);
  EXPECT_EQ(x.view({2, 3}).t().to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.view({2, 3}).t().reshape({6}).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_FALSE(x.view({2, 3}).requires_grad());
}

TEST(ViewOps, AutogradRecordsViewNodes) {
  Tensor x = testing::leaf({2, 3});
  Tensor v = x.transpose(0, 1);
  EXPECT_TRUE(v.requires_grad());
  EXPECT_EQ(v.grad_fn_name(), "TransposeBackward");
  EXPECT_TRUE(shares_storage(x, v));
  Tensor s = x.slice(1, 1, 3);
  sum(s).backward();
  EXPECT_TRUE(testing::allclose(x.grad(), {0, 1, 1, 0, 1, 1}));
}

// ---- gradient checks (float64) ------------------------------------------------------

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

TEST(ViewGrad, ViewReshapeFlatten) {
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].view({3, -1}); },
                                 {testing::leaf({2, 3, 2})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].t().reshape({6}); },
                                 {testing::leaf({2, 3})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].permute({2, 0, 1}).flatten(1); },
                                 {testing::leaf({2, 3, 2})}));
}

TEST(ViewGrad, TransposePermute) {
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].transpose(0, 2); },
                                 {testing::leaf({2, 3, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].permute({1, 2, 0}); },
                                 {testing::leaf({2, 3, 4})}));
}

TEST(ViewGrad, SliceNarrowSelect) {
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].slice(1, -3, std::nullopt, 2); },
                                 {testing::leaf({2, 5})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].t().narrow(0, 1, 2); },
                                 {testing::leaf({2, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].select(1, -2); },
                                 {testing::leaf({3, 4, 2})}));
  // Overlapping uses of one input accumulate.
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& in) { return in[0].slice(0, 0, 2) * in[0].slice(0, 1, 3); },
      {testing::leaf({3, 2})}));
}

TEST(ViewGrad, UnsqueezeSqueezeExpand) {
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].unsqueeze(-2); },
                                 {testing::leaf({3, 2})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].squeeze(); },
                                 {testing::leaf({3, 1, 2, 1})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].squeeze(1); },
                                 {testing::leaf({3, 1, 2})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return in[0].expand({4, 3, -1, 2}); },
                                 {testing::leaf({3, 1, 2})}));
}

TEST(ViewGrad, SliceAndSelectBackwardOpsAreDifferentiable) {
  // The scatter ops used as view gradients have gradients of their own.
  Fn slice_bwd = [](const auto& in) {
    return dispatch1(op("slice_backward"), {in[0]},
                     Attrs{{"input_shape", Shape{2, 7}}, {"dim", int64_t{1}}, {"start", int64_t{1}},
                           {"step", int64_t{3}}});
  };
  Tensor g = testing::leaf({2, 2});
  Tensor out = slice_bwd({g});
  EXPECT_EQ(out.shape(), (Shape{2, 7}));
  const auto gv = g.to_vector<double>();
  EXPECT_TRUE(testing::allclose(out, {0, gv[0], 0, 0, gv[1], 0, 0, 0, gv[2], 0, 0, gv[3], 0, 0}));
  EXPECT_TRUE(testing::gradcheck(slice_bwd, {g}));
  Fn select_bwd = [](const auto& in) {
    return dispatch1(op("select_backward"), {in[0]},
                     Attrs{{"input_shape", Shape{2, 3}}, {"dim", int64_t{0}}, {"index", int64_t{1}}});
  };
  EXPECT_TRUE(testing::gradcheck(select_bwd, {testing::leaf({3})}));
  // Strided gradient input (a transposed view) lands in the right places.
  Tensor gt = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}).t();  // [[1,3,5],[2,4,6]]
  Tensor s = dispatch1(op("select_backward"), {gt},
                       Attrs{{"input_shape", Shape{2, 2, 3}}, {"dim", int64_t{1}}, {"index", int64_t{0}}});
  EXPECT_TRUE(testing::allclose(s, {1, 3, 5, 0, 0, 0, 2, 4, 6, 0, 0, 0}));
}

// Found by tests/fuzz/fuzz_dispatch: select_backward, a row callable by
// name, erased dim 5 of a 2-D input shape (past its end) and asserted an
// internal invariant on what are the caller's attributes.
TEST(ViewOps, SelectBackwardChecksItsAttributes) {
  const OpDef& row = op("select_backward");
  const Tensor g = ones({3});
  const auto attrs = [](int64_t dim, int64_t index) {
    return Attrs{{"input_shape", Shape{2, 3}}, {"dim", dim}, {"index", index}};
  };
  EXPECT_THROW((void)dispatch1(row, {g}, attrs(5, 0)), IndexError);
  EXPECT_THROW((void)dispatch1(row, {g}, attrs(-1, 0)), IndexError);
  EXPECT_THROW((void)dispatch1(row, {g}, attrs(0, 2)), ValueError);  // index past dim 0's 2
  EXPECT_EQ(dispatch1(row, {g}, attrs(0, 1)).shape(), (Shape{2, 3}));
}

// slice_backward by name: a dim past the input shape read the gradient's
// shape out of range before the fit was checked.
TEST(ViewOps, SliceBackwardChecksItsAttributes) {
  const OpDef& row = op("slice_backward");
  const Tensor g = ones({2, 2});
  const auto attrs = [](int64_t dim, int64_t start, int64_t step) {
    return Attrs{{"input_shape", Shape{2, 4}}, {"dim", dim}, {"start", start}, {"step", step}};
  };
  EXPECT_THROW((void)dispatch1(row, {g}, attrs(7, 0, 1)), IndexError);
  EXPECT_THROW((void)dispatch1(row, {g}, attrs(-1, 0, 1)), IndexError);
  EXPECT_THROW((void)dispatch1(row, {g}, attrs(1, 3, 1)), ValueError);  // past dim 1's 4
  EXPECT_THROW((void)dispatch1(row, {g}, attrs(1, 0, 0)), ValueError);
  const Tensor r = dispatch1(row, {g}, attrs(1, 1, 2));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 1, 0, 1, 0, 1, 0, 1}));
}

}  // namespace
}  // namespace dtr
