// flip, roll, repeat, repeat_interleave, scatter_add(_), index_add(_) and
// einsum beyond the conformance cases: strided in-place targets, integer
// dtypes, the accumulation order, gradients PyTorch cannot give, and the
// typed errors for bad arguments. Expected values pasted from torch 1.13.
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

Tensor iota(IntList shape, DType dtype = kFloat32) { return reshape(arange(numel(shape), dtype), shape); }

Tensor ints(const std::vector<int64_t>& v, IntList shape = {}) { return from_vector(v, shape); }

Tensor floats(const std::vector<float>& v, IntList shape = {}) { return from_vector(v, shape); }

using testing::throws_with;

// ---- flip, roll ------------------------------------------------------------------------

TEST(ShapeOps, FlipAndRollOfIntegersAndEdgeShapes) {
  EXPECT_EQ(flip(iota({2, 3}, kInt64), {0, 1}).to_vector<int64_t>(), (std::vector<int64_t>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(flip(iota({2, 3}, kInt64), {}).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  // A flipped view of a transposed tensor reads through its strides.
  EXPECT_EQ(transpose(iota({2, 3}, kInt64), 0, 1).flip({0}).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(roll(iota({5}, kInt64), {-7}).to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 4, 0, 1}));
  EXPECT_EQ(roll(iota({2, 2}, kInt64), {1}, {1}).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3, 2}));
  // torch.roll(torch.tensor(3.), 1) is 3; an empty tensor stays empty.
  EXPECT_TRUE(testing::allclose(roll(full({}, 3.0), {1}), {3.0}));
  EXPECT_EQ(roll(zeros({0, 2}), {1}, {1}).shape(), (Shape{0, 2}));
  // The result is a copy, never the input's storage.
  Tensor x = iota({3});
  EXPECT_NE(roll(x, {3}).storage(), x.storage());
}

// Copies whose innermost dim is short and strided (a nearest upsample's
// broadcast pair, a permute that puts a dim of 3 last) run along the next
// dim (copy_strided): every element lands where index arithmetic puts it,
// for each item size and on either side of a thread split.
TEST(ShapeOps, CopiesWithAShortStridedInnermostDim) {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kUInt8}) {
    for (int64_t W : {1, 5, 40, 3000}) {
      const int64_t N = 2, C = 3, H = 4;
      std::vector<int64_t> values(size_t(N * C * H * W));
      for (size_t i = 0; i < values.size(); ++i) values[i] = int64_t(i % 251);
      const Tensor x = ints(values, {N, C, H, W}).to(dtype);
      // upsample2x: (N, C, H, 1, W, 1) expanded to (..., 2, ..., 2), then copied.
      const Tensor up = x.reshape({N, C, H, 1, W, 1}).expand({N, C, H, 2, W, 2}).reshape({N, C, 2 * H, 2 * W});
      const auto xv = x.to(kInt64).to_vector<int64_t>(), uv = up.to(kInt64).to_vector<int64_t>();
      size_t wrong = 0;
      for (int64_t p = 0; p < N * C; ++p)
        for (int64_t i = 0; i < 2 * H; ++i)
          for (int64_t j = 0; j < 2 * W; ++j)
            wrong += uv[size_t((p * 2 * H + i) * 2 * W + j)] != xv[size_t((p * H + i / 2) * W + j / 2)];
      EXPECT_EQ(wrong, 0u) << dtype_name(dtype) << " W " << W;
      // (N, H, W, C): the channel dim of 3 last, stride H * W in the source.
      const Tensor nhwc = x.permute({0, 2, 3, 1}).contiguous();
      const auto nv = nhwc.to(kInt64).to_vector<int64_t>();
      wrong = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < H * W; ++i)
          for (int64_t c = 0; c < C; ++c)
            wrong += nv[size_t((n * H * W + i) * C + c)] != xv[size_t((n * C + c) * H * W + i)];
      EXPECT_EQ(wrong, 0u) << dtype_name(dtype) << " W " << W;
    }
  }
}

TEST(ShapeOps, FlipRollErrors) {
  EXPECT_TRUE(throws_with<ValueError>([] { (void)flip(zeros({2, 3}), {1, -1}); }, {"flip", "duplicates"}));
  EXPECT_TRUE(throws_with<IndexError>([] { (void)flip(zeros({2, 3}), {2}); }, {"flip", "out of range"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)roll(zeros({2, 3}), {1, 2}, {0}); }, {"roll", "align"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)roll(zeros({2, 3}), {1, 2}); }, {"roll", "one element"}));
  EXPECT_TRUE(throws_with<IndexError>([] { (void)roll(zeros({2, 3}), {1}, {3}); }, {"roll"}));
}

// ---- repeat, repeat_interleave ---------------------------------------------------------

TEST(ShapeOps, RepeatAndRepeatInterleave) {
  Tensor x = iota({2}, kInt64);
  Tensor r = x.repeat({2, 2});
  EXPECT_EQ(r.shape(), (Shape{2, 4}));
  EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(repeat(x, {0}).shape(), (Shape{0}));
  Tensor same = repeat(x, {1});
  EXPECT_NE(same.storage(), x.storage()) << "repeat returns a copy";
  EXPECT_EQ(repeat(full({}, 2.0), {3}).shape(), (Shape{3}));

  EXPECT_EQ(x.repeat_interleave(3).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(repeat_interleave(x, 0).shape(), (Shape{0}));
  EXPECT_NE(repeat_interleave(x, 1).storage(), x.storage());
  // torch.repeat_interleave(torch.arange(4.).reshape(2, 2), torch.tensor([2]), 1)
  EXPECT_TRUE(testing::allclose(repeat_interleave(iota({2, 2}), ints({2}), 1), {0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(repeat_interleave(iota({2, 2}), ints({1, 0}), 0).shape(), (Shape{1, 2}));
  // Grouped-query attention: kv heads (B, 2, T, D) → (B, 4, T, D), gradient summed per group.
  Tensor kv = iota({1, 2, 1, 2}, kFloat64).requires_grad_();
  Tensor rep = repeat_interleave(kv, 2, 1);
  EXPECT_TRUE(testing::allclose(rep, {0, 1, 0, 1, 2, 3, 2, 3}));
  sum(mul(rep, iota({1, 4, 1, 2}, kFloat64))).backward();
  EXPECT_TRUE(testing::allclose(kv.grad(), {0 + 2, 1 + 3, 4 + 6, 5 + 7}));
}

TEST(ShapeOps, RepeatErrors) {
  EXPECT_TRUE(throws_with<ValueError>([] { (void)repeat(zeros({2, 3}), {2}); }, {"repeat", "smaller"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)repeat(zeros({2}), {-1}); }, {"repeat", "negative"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)repeat_interleave(zeros({2}), -1); },
                                      {"repeat_interleave", "negative"}));
  EXPECT_TRUE(throws_with<TypeError>([] { (void)repeat_interleave(zeros({2}), floats({1, 2})); },
                                     {"repeat_interleave", "int64"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)repeat_interleave(zeros({2}), ints({1, 2, 3})); },
                                      {"repeat_interleave", "same size"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)repeat_interleave(zeros({2}), ints({1, -2})); },
                                      {"repeat_interleave", "negative"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)repeat_interleave(zeros({2}), ints({1, 1, 1, 1}, {2, 2})); },
                                      {"repeat_interleave", "0-dim or 1-dim"}));
  EXPECT_TRUE(throws_with<IndexError>([] { (void)repeat_interleave(zeros({2}), 2, 1); }, {"repeat_interleave"}));
}

// ---- scatter_add, index_add ------------------------------------------------------------

TEST(ShapeOps, InPlaceScattersWriteThroughStridedViews) {
  Tensor x = iota({3, 2});
  Tensor xt = transpose(x, 0, 1);
  xt.scatter_add_(1, ints({0, 2, 1, 1}, {2, 2}), floats({1, 2, 3, 4}, {2, 2}));
  EXPECT_TRUE(testing::allclose(x, {1, 1, 2, 10, 6, 5}));

  Tensor y = iota({3, 2});
  transpose(y, 0, 1).index_add_(1, ints({2, 0, 2}), floats({1, 2, 3, 4, 5, 6}, {2, 3}), 0.5);
  EXPECT_TRUE(testing::allclose(y, {1, 3.5, 2, 3, 6, 10}));

  // src aliasing self is read before any write (a copy).
  Tensor z = iota({4});
  z.scatter_add_(0, ints({0, 0, 0, 0}), z);
  EXPECT_TRUE(testing::allclose(z, {6, 1, 2, 3}));
}

TEST(ShapeOps, IntegerScattersAndAlpha) {
  Tensor x = zeros({3}, kInt64);
  EXPECT_EQ(index_add(x, 0, ints({0, 0, 2}), ints({1, 2, 3}), 2).to_vector<int64_t>(),
            (std::vector<int64_t>{6, 0, 6}));
  EXPECT_EQ(scatter_add(x, 0, ints({2, 2}), ints({5, 7})).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 12}));
  Tensor i32 = from_vector(std::vector<int32_t>{1, 1});
  EXPECT_EQ(index_add(zeros({2}, kInt32), 0, ints({1, 1}), i32).to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)index_add(x, 0, ints({0}), ints({1}), 0.5); },
                                     {"index_add", "alpha"}));
}

TEST(ShapeOps, ScatterAddAccumulatesInIndexOrder) {
  // Many float32 additions into few slots: the sum must be the sequential one
  // in index order, every time.
  const int64_t n = 20000;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<float> src(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    idx[size_t(i)] = (i * 7919) % 3;
    src[size_t(i)] = float(std::sin(0.37 * double(i))) * 1000.0f;
  }
  std::vector<float> expected(3, 0.0f);
  for (int64_t i = 0; i < n; ++i) expected[size_t(idx[size_t(i)])] += src[size_t(i)];
  const Tensor out = scatter_add(zeros({3}), 0, ints(idx), floats(src));
  EXPECT_EQ(out.to_vector<float>(), expected);
  const Tensor out2 = index_add(zeros({3}), 0, ints(idx), floats(src));
  EXPECT_EQ(out2.to_vector<float>(), expected);
}

TEST(ShapeOps, ScatterAddGradientOfALargerSrc) {
  // src larger than index: its gradient is zero where no index entry reads it
  // (PyTorch's autograd refuses this case).
  Tensor x = zeros({2, 3}, kFloat64).requires_grad_();
  Tensor src = iota({2, 3}, kFloat64).requires_grad_();
  Tensor out = scatter_add(x, 0, ints({1, 0}, {1, 2}), src);
  EXPECT_TRUE(testing::allclose(out, {0, 1, 0, 0, 0, 0}));
  sum(mul(out, iota({2, 3}, kFloat64))).backward();
  EXPECT_TRUE(testing::allclose(x.grad(), {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(testing::allclose(src.grad(), {3, 1, 0, 0, 0, 0}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, ints({2, 0, 0, 1}, {2, 2}), in[1]); },
      {iota({2, 3}, kFloat64).requires_grad_(), iota({3, 3}, kFloat64).requires_grad_()}));
}

TEST(ShapeOps, ScatterErrors) {
  Tensor x = zeros({2, 3});
  Tensor i = ints({0, 1, 1, 0}, {2, 2});
  Tensor s = ones({2, 2});
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)scatter_add(x, 0, i.to(kInt32), s); }, {"scatter_add", "int64"}));
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)scatter_add(x, 0, i, s.to(kFloat64)); },
                                     {"scatter_add", "src.dtype"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)scatter_add(x, 0, ints({0, 1}), s); },
                                      {"scatter_add", "number of dimensions"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)scatter_add(x, 1, ints({0, 0, 0, 0, 0, 0}, {3, 2}), ones({3, 2})); },
                                      {"scatter_add", "no larger"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)scatter_add(x, 1, i, ones({2, 1})); }, {"scatter_add", "no larger"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { (void)scatter_add(x, 0, ints({0, 2, 1, 0}, {2, 2}), s); },
                                      {"scatter_add", "out of bounds"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { (void)scatter_add(x, 2, i, s); }, {"scatter_add"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { expand(zeros({1, 3}), {2, 3}).scatter_add_(0, i, s); },
                                      {"scatter_add_", "single memory location"}));

  EXPECT_TRUE(throws_with<ValueError>([&] { (void)index_add(x, 0, i, s); }, {"index_add", "0-d or 1-d"}));
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)index_add(x, 0, ints({0}), ones({1, 3}, kFloat64)); },
                                     {"index_add", "same dtype"}));
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)index_add(x, 0, floats({0}), ones({1, 3})); },
                                     {"index_add", "int64 or int32"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)index_add(x, 0, ints({0, 1}), ones({1, 3})); },
                                      {"index_add", "source of shape [1, 3]"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { (void)index_add(x, 1, ints({3}), ones({2, 1})); },
                                      {"index_add", "out of bounds"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.index_add_(-3, ints({0}), ones({1, 3})); }, {"index_add_"}));
}

// ---- einsum ------------------------------------------------------------------------------

TEST(ShapeOps, EinsumFormsAgreeWithTheOpsTheyName) {
  Tensor a = iota({2, 3}), b = iota({3, 4});
  EXPECT_TRUE(testing::allclose(einsum("ij,jk->ik", {a, b}), matmul(a, b).to_vector<double>()));
  EXPECT_TRUE(testing::allclose(einsum(" i j , j k ", {a, b}), matmul(a, b).to_vector<double>()));
  EXPECT_TRUE(testing::allclose(einsum("ij->ji", {a}), transpose(a, 0, 1).contiguous().to_vector<double>()));
  EXPECT_TRUE(testing::allclose(einsum("ij->j", {a}), {3, 5, 7}));
  EXPECT_TRUE(testing::allclose(einsum("ij,ij->ij", {a, a}), mul(a, a).to_vector<double>()));
  // torch.einsum('...i,...i->...', torch.arange(6.).reshape(2, 3), torch.arange(3.))
  EXPECT_TRUE(testing::allclose(einsum("...i,...i->...", {a, iota({3})}), {5, 14}));
  EXPECT_EQ(einsum("i,i", {iota({3}), iota({3})}).dim(), 0);
  Tensor c = iota({4, 2});
  EXPECT_TRUE(testing::allclose(einsum("ij,jk,kl->il", {a, b, c}), matmul(matmul(a, b), c).to_vector<double>()));
  // Implicit output: upper case before lower case (torch.einsum('bA', x).shape == (3, 2)).
  EXPECT_EQ(einsum("bA", {a}).shape(), (Shape{3, 2}));
  // Upper- and lower-case letters are distinct: trace(x @ x) for x = [[0, 1], [2, 3]].
  EXPECT_TRUE(testing::allclose(einsum("Ab,bA->", {iota({2, 2}), iota({2, 2})}), {13}));
}

TEST(ShapeOps, EinsumErrorsNameTheEquation) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ij,jk->ik", {a}); }, {"einsum", "ij,jk->ik", "operands"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ij->ik", {a}); }, {"einsum", "ij->ik", "k"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("i1->i", {a}); }, {"einsum", "i1->i", "'1'"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ijk->i", {a}); }, {"einsum", "ijk->i", "dimensions"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ij,jk->ik", {a, b}); }, {"einsum", "ij,jk->ik", "size"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ii->i", {a}); }, {"einsum", "ii->i"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ij->ii", {a}); }, {"einsum", "more than once"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("i..j->ij", {a}); }, {"einsum", "ellipsis"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ij->j->i", {a}); }, {"einsum", "->"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)einsum("ij", {}); }, {"einsum", "operand"}));
}

}  // namespace
}  // namespace dtr
