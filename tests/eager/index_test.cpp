// Joining and indexing: cat, stack, split, chunk, index_select, gather,
// masked_fill(_), tril, triu. Expected values pasted from torch 1.13; gradient
// checks in float64; scatter-add backward kernels are deterministic.
#include <limits>
#include <string>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

Tensor iota(IntList shape, DType dtype = kFloat32) { return reshape(arange(numel(shape), dtype), shape); }

Tensor ints(const std::vector<int64_t>& v, IntList shape = {}) { return from_vector(v, shape); }

using testing::throws_with;

// ---- cat, stack ---------------------------------------------------------------------

TEST(IndexOps, CatAlongDims) {
  Tensor a = iota({2, 2});
  Tensor b = from_vector(std::vector<float>{10, 11}, {2, 1});
  Tensor c1 = cat({a, b}, 1);
  EXPECT_EQ(c1.shape(), (Shape{2, 3}));
  EXPECT_TRUE(testing::allclose(c1, {0, 1, 10, 2, 3, 11}));
  Tensor c0 = cat({a, b.t(), a}, 0);
  EXPECT_EQ(c0.shape(), (Shape{5, 2}));
  EXPECT_TRUE(testing::allclose(c0, {0, 1, 2, 3, 10, 11, 0, 1, 2, 3}));
  EXPECT_TRUE(testing::allclose(cat({a.t(), b}, -1), {0, 2, 10, 1, 3, 11}));  // strided input
  // dtypes promote like torch.cat: int64 + float32 -> float32.
  Tensor mixed = cat({arange(2).view({2, 1}), ones({2, 2})}, 1);
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(mixed, {0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(cat({arange(2), arange(3)}).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1, 2}));
  // Legacy 1-D empty tensors are skipped.
  EXPECT_EQ(cat({zeros({0}), a, zeros({0})}, 1).shape(), (Shape{2, 2}));
  // More inputs than one autograd node takes.
  std::vector<Tensor> many;
  for (int i = 0; i < 150; ++i) many.push_back(full({1}, double(i)));
  Tensor big = cat(many);
  ASSERT_EQ(big.shape(), (Shape{150}));
  EXPECT_EQ(big.to_vector<float>()[149], 149.0f);
  EXPECT_EQ(big.to_vector<float>()[64], 64.0f);
}

TEST(IndexOps, CatErrors) {
  Tensor a = iota({2, 2});
  EXPECT_TRUE(throws_with<ValueError>([] { cat({}); }, {"cat", "non-empty"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { cat({a, iota({3, 3})}, 0); },
                                      {"cat", "dimension 0", "[2, 2]", "[3, 3]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { cat({a, iota({4})}); }, {"cat", "number of dimensions"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { cat({full({}, 1.0), full({}, 2.0)}); }, {"cat", "zero-dimensional"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { cat({a, a}, 2); }, {"cat"}));
}

TEST(IndexOps, Stack) {
  Tensor a = iota({2, 3});
  Tensor b = a + 10.0;
  Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(testing::allclose(s0, {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}));
  Tensor s2 = stack({a, b}, -1);
  EXPECT_EQ(s2.shape(), (Shape{2, 3, 2}));
  EXPECT_TRUE(testing::allclose(s2, {0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}));
  EXPECT_EQ(stack({a, b}, 1).shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(throws_with<ValueError>([&] { stack({a, iota({3, 2})}); }, {"stack", "[2, 3]", "[3, 2]"}));
  EXPECT_THROW(stack({a, b}, 3), IndexError);
  EXPECT_THROW(stack({}), ValueError);
}

// ---- split, chunk --------------------------------------------------------------------

TEST(IndexOps, SplitAndChunkAreViews) {
  Tensor x = iota({5, 2});
  auto parts = split(x, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));
  EXPECT_TRUE(testing::allclose(parts[1], {4, 5, 6, 7}));
  EXPECT_EQ(parts[1].storage().get(), x.storage().get());
  EXPECT_EQ(parts[1].storage_offset(), 4);
  auto cols = split(x, 1, 1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_TRUE(testing::allclose(cols[1], {1, 3, 5, 7, 9}));
  // torch: arange(6).chunk(4) -> sizes [2, 2, 2]; arange(5).chunk(3) -> [2, 2, 1].
  auto c = chunk(arange(6), 4);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  auto c3 = chunk(arange(5), 3);
  ASSERT_EQ(c3.size(), 3u);
  EXPECT_EQ(c3[2].shape(), (Shape{1}));
  EXPECT_EQ(chunk(zeros({0, 2}), 3).size(), 3u);
  EXPECT_TRUE(throws_with<ValueError>([&] { chunk(x, 0); }, {"chunk"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { split(x, 0); }, {"split"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { split(x, -1); }, {"split"}));
  EXPECT_THROW(split(x, 2, 2), IndexError);
}

// ---- index_select, gather --------------------------------------------------------------

TEST(IndexOps, IndexSelect) {
  Tensor x = iota({3, 4});
  Tensor s = index_select(x, 1, ints({3, 0, 3}));
  EXPECT_EQ(s.shape(), (Shape{3, 3}));
  EXPECT_TRUE(testing::allclose(s, {3, 0, 3, 7, 4, 7, 11, 8, 11}));
  Tensor r = index_select(x, 0, from_vector(std::vector<int32_t>{2, 2}));
  EXPECT_TRUE(testing::allclose(r, {8, 9, 10, 11, 8, 9, 10, 11}));
  EXPECT_TRUE(testing::allclose(index_select(x.t(), 0, ints({1})), {1, 5, 9}));
  EXPECT_EQ(index_select(iota({4}, kInt64), 0, ints({3, 1})).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(index_select(x, 0, ints({1}).view({})).shape(), (Shape{1, 4}));  // 0-d index
  EXPECT_EQ(index_select(x, 0, ints({}, {0})).shape(), (Shape{0, 4}));

  EXPECT_TRUE(throws_with<IndexError>([&] { index_select(x, 1, ints({1, 4})); },
                                      {"index_select", "4", "size 4"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { index_select(x, 0, ints({-1})); }, {"index_select", "-1"}));
  EXPECT_TRUE(throws_with<TypeError>([&] { index_select(x, 0, from_vector(std::vector<float>{0})); },
                                     {"index_select", "float32"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { index_select(x, 0, ints({0, 1}, {1, 2})); },
                                      {"index_select", "[1, 2]"}));
  EXPECT_THROW(index_select(x, 2, ints({0})), IndexError);
}

TEST(IndexOps, Gather) {
  Tensor x = iota({3, 4});
  Tensor g1 = gather(x, 1, ints({0, 2, 1, 3, 3, 0}, {2, 3}));
  EXPECT_EQ(g1.shape(), (Shape{2, 3}));
  EXPECT_TRUE(testing::allclose(g1, {0, 2, 1, 7, 7, 4}));
  Tensor g0 = gather(x, 0, ints({2, 0, 1, 1, 0, 0, 2, 1}, {2, 4}));
  EXPECT_TRUE(testing::allclose(g0, {8, 1, 6, 7, 0, 1, 10, 7}));
  EXPECT_TRUE(testing::allclose(gather(x.t(), 0, ints({2, 1}, {1, 2})), {2, 5}));  // strided x
  EXPECT_TRUE(throws_with<IndexError>([&] { gather(x, 1, ints({4}, {1, 1})); },
                                      {"gather", "4", "size 4"}));
  EXPECT_TRUE(throws_with<TypeError>([&] { gather(x, 1, from_vector(std::vector<int32_t>{0}, {1, 1})); },
                                     {"gather", "int64"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { gather(x, 1, ints({0})); }, {"gather", "[1]", "[3, 4]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { gather(x, 1, ints({0, 0, 0, 0}, {4, 1})); },
                                      {"gather", "[4, 1]", "[3, 4]"}));
}

// ---- masked_fill -----------------------------------------------------------------------

TEST(IndexOps, MaskedFillBroadcasts) {
  Tensor x = iota({3, 4});
  Tensor row = from_vector(std::vector<bool>{true, false, false, true});
  EXPECT_TRUE(testing::allclose(masked_fill(x, row, -1.5),
                                {-1.5, 1, 2, -1.5, -1.5, 5, 6, -1.5, -1.5, 9, 10, -1.5}));
  Tensor col = from_vector(std::vector<bool>{true, false, true}, {3, 1});
  EXPECT_TRUE(testing::allclose(x.masked_fill(col, 9), {9, 9, 9, 9, 4, 5, 6, 7, 9, 9, 9, 9}));
  // The mask may also broadcast x (torch: zeros(4).masked_fill(mask[2, 4], 2)).
  Tensor m2 = from_vector(std::vector<bool>{true, false, false, false, false, true, false, false}, {2, 4});
  Tensor out = masked_fill(zeros({4}), m2, 2);
  EXPECT_EQ(out.shape(), (Shape{2, 4}));
  EXPECT_TRUE(testing::allclose(out, {2, 0, 0, 0, 0, 2, 0, 0}));
  // Strided x, float64 and integer dtypes; integer values keep every bit.
  EXPECT_TRUE(testing::allclose(masked_fill(x.t(), col.t(), 0.5), {0.5, 4, 0.5, 0.5, 5, 0.5, 0.5, 6, 0.5, 0.5, 7, 0.5}));
  EXPECT_TRUE(testing::allclose(masked_fill(iota({4}, kFloat64), row, 3), {3, 1, 2, 3}));
  const int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(masked_fill(arange(2), from_vector(std::vector<bool>{false, true}), big).to_vector<int64_t>(),
            (std::vector<int64_t>{0, big}));

  EXPECT_TRUE(throws_with<TypeError>([&] { masked_fill(x, iota({4}), 0); }, {"masked_fill", "bool"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { masked_fill(x, from_vector(std::vector<bool>{true, false}), 0); },
                                      {"masked_fill", "[3, 4]", "[2]"}));
}

TEST(IndexOps, MaskedFillInPlaceWritesThroughViews) {
  Tensor x = iota({3, 4});
  Tensor row = from_vector(std::vector<bool>{true, false, false, true});
  Tensor& same = x.masked_fill_(row, -1);
  EXPECT_EQ(same.impl(), x.impl());
  EXPECT_TRUE(testing::allclose(x, {-1, 1, 2, -1, -1, 5, 6, -1, -1, 9, 10, -1}));
  // Into a strided view of a base: the base sees the writes.
  Tensor base = zeros({2, 3});
  base.t().masked_fill_(from_vector(std::vector<bool>{true, false}), 4);  // column 0 of base.t()
  EXPECT_TRUE(testing::allclose(base, {4, 4, 4, 0, 0, 0}));
  // The mask must broadcast to self's shape, not the other way round.
  Tensor m2 = from_vector(std::vector<bool>{true, false, false, false, false, true, false, false}, {2, 4});
  EXPECT_TRUE(throws_with<ValueError>([&] { zeros({4}).masked_fill_(m2, 1); }, {"masked_fill_", "[2, 4]", "[4]"}));
  EXPECT_THROW(zeros({4}).masked_fill_(zeros({4}), 1), TypeError);
}

// ---- tril, triu --------------------------------------------------------------------------

TEST(IndexOps, TrilTriu) {
  Tensor x = iota({3, 4});
  EXPECT_TRUE(testing::allclose(tril(x), {0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0}));
  EXPECT_TRUE(testing::allclose(tril(x, -1), {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0}));
  EXPECT_TRUE(testing::allclose(triu(x, 1), {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11}));
  EXPECT_TRUE(testing::allclose(triu(x, -2), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(testing::allclose(tril(x, 10), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(testing::allclose(triu(x, 10), std::vector<double>(12, 0.0)));
  // Batched, strided input, integer dtype.
  Tensor b = stack({x, x + 100.0});
  EXPECT_TRUE(testing::allclose(tril(b).select(0, 1), {100, 0, 0, 0, 104, 105, 0, 0, 108, 109, 110, 0}));
  EXPECT_TRUE(testing::allclose(triu(x.t()), {0, 4, 8, 0, 5, 9, 0, 0, 10, 0, 0, 0}));
  EXPECT_EQ(tril(ones({2, 2}, kBool)).to_vector<bool>(), (std::vector<bool>{true, false, true, true}));
  EXPECT_TRUE(throws_with<ValueError>([] { tril(zeros({3})); }, {"tril", "[3]"}));
  EXPECT_TRUE(throws_with<ValueError>([] { triu(zeros({})); }, {"triu"}));
}

// ---- determinism ----------------------------------------------------------------------------

TEST(IndexOps, ScatterAddBackwardIsDeterministic) {
  // Many rows gathered into few slots: the summation order must not depend
  // on the thread count (bitwise equal) and must be index order.
  constexpr int64_t kRows = 400, kCols = 2048, kSlots = 5;
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < kRows; ++i) idx.push_back((i * 7) % kSlots);
  Tensor index = ints(idx);
  std::vector<float> gv(size_t(kRows * kCols));
  for (size_t i = 0; i < gv.size(); ++i) gv[i] = 1.0f / float(1 + (i * 13) % 97);
  Tensor grad = from_vector(gv, {kRows, kCols});
  auto run = [&](int threads) {
    const int prev = num_threads();
    set_num_threads(threads);
    Tensor r = dispatch1(op("index_select_backward"), {grad, index},
                         Attrs{{"dim", int64_t{0}}, {"input_shape", Shape{kSlots, kCols}}});
    Tensor g = dispatch1(op("gather_backward"),
                         {grad.t().contiguous(), index.view({1, kRows}).expand({kCols, kRows}).contiguous()},
                         Attrs{{"dim", int64_t{1}}, {"input_shape", Shape{kCols, kSlots}}});
    set_num_threads(prev);
    return std::make_pair(r, g);
  };
  auto [r1, g1] = run(1);
  auto [r4, g4] = run(4);
  EXPECT_TRUE(testing::bitwise_equal(r1, r4));
  EXPECT_TRUE(testing::bitwise_equal(g1, g4));
  std::vector<float> expected(size_t(kSlots * kCols), 0.0f);
  for (size_t i = 0; i < size_t(kRows); ++i)
    for (size_t c = 0; c < size_t(kCols); ++c) expected[size_t(idx[i]) * kCols + c] += gv[i * kCols + c];
  const auto got = r1.to_vector<float>();
  size_t mismatches = 0;
  for (size_t k = 0; k < expected.size(); ++k) mismatches += got[k] != expected[k];
  EXPECT_EQ(mismatches, 0u);
  EXPECT_TRUE(testing::bitwise_equal(g1, r1.t().contiguous()));
}

// ---- gradient checks (float64) ----------------------------------------------------------------

TEST(IndexGrad, CatStack) {
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return cat({in[0], in[1].t()}, 1); },
                                 {testing::leaf({2, 3}, 1), testing::leaf({2, 2}, 2)}));
  Tensor fixed = from_vector(std::vector<double>{1, 2}, {1, 2});  // no grad
  EXPECT_TRUE(testing::gradcheck([&](const auto& in) { return cat({fixed, in[0], fixed}, 0); },
                                 {testing::leaf({3, 2})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return stack({in[0], in[1], in[0]}, 1); },
                                 {testing::leaf({2, 3}, 3), testing::leaf({2, 3}, 4)}));
}

// Note [cat gradients are copies]: each input's gradient is its own storage,
// so holding one input's gradient does not keep the whole output gradient.
TEST(IndexGrad, CatGradientsAreCopiesNotViewsOfTheOutputGradient) {
  const Tensor up = randn({4, 1024}).requires_grad_(true), skip = randn({4, 1024}).requires_grad_(true);
  const Tensor y = cat({up, skip}, 1);
  const Tensor g = randn({4, 2048});
  const int64_t part = 4 * 1024 * int64_t(sizeof(float));
  {
    const std::vector<Tensor> gs = autograd::grad({y}, {up, skip}, {g}, /*retain_graph=*/true);
    EXPECT_TRUE(testing::bitwise_equal(gs[0], g.narrow(1, 0, 1024).contiguous()));
    EXPECT_TRUE(testing::bitwise_equal(gs[1], g.narrow(1, 1024, 1024).contiguous()));
    const auto* lo = static_cast<const char*>(g.raw_data_ptr());
    for (const Tensor& t : gs) {
      const auto* p = static_cast<const char*>(t.raw_data_ptr());
      EXPECT_TRUE(p + part <= lo || p >= lo + 2 * part) << "a gradient of cat aliases its output gradient";
    }
  }
  // Only the skip gradient held: resident bytes grow by its own size, not
  // by the whole (4, 2048) output gradient a view would keep.
  const int64_t before = remat::stats().resident_bytes;
  Tensor held;
  {
    std::vector<Tensor> gs = autograd::grad({y}, {up, skip}, {randn({4, 2048})});
    held = gs[1];
  }
  EXPECT_EQ(remat::stats().resident_bytes - before, part);
  // A cat of one tensor passes its gradient through.
  const Tensor one = cat({up}, 0);
  EXPECT_TRUE(testing::bitwise_equal(autograd::grad({one}, {up}, {g.narrow(1, 0, 1024)})[0], g.narrow(1, 0, 1024)));
}

TEST(IndexGrad, SplitChunk) {
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return split(in[0], 2, 1)[1] * 3.0; },
                                 {testing::leaf({2, 5})}));
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& in) {
        auto c = chunk(in[0], 3, 0);
        return c[0] * c[2];
      },
      {testing::leaf({3, 2})}));
}

TEST(IndexGrad, IndexSelectGather) {
  // Repeated indices accumulate.
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return index_select(in[0], 1, ints({2, 0, 2, 2})); },
                                 {testing::leaf({3, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return index_select(in[0], 0, ints({1, 1})); },
                                 {testing::leaf({3, 2, 2})}));
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& in) { return gather(in[0], 1, ints({0, 2, 2, 1, 1, 1}, {2, 3})); },
      {testing::leaf({3, 4})}));
  EXPECT_TRUE(testing::gradcheck(
      [](const auto& in) { return gather(in[0], 0, ints({2, 0, 2, 2}, {2, 2})); },
      {testing::leaf({3, 3})}));
}

TEST(IndexGrad, ScatterBackwardOpsAreDifferentiable) {
  Tensor index = ints({2, 0, 2});
  EXPECT_TRUE(testing::gradcheck(
      [&](const auto& in) {
        return dispatch1(op("index_select_backward"), {in[0], index},
                         Attrs{{"dim", int64_t{1}}, {"input_shape", Shape{2, 4}}});
      },
      {testing::leaf({2, 3})}));
  Tensor gidx = ints({1, 1, 0, 2}, {2, 2});
  EXPECT_TRUE(testing::gradcheck(
      [&](const auto& in) {
        return dispatch1(op("gather_backward"), {in[0], gidx},
                         Attrs{{"dim", int64_t{0}}, {"input_shape", Shape{3, 2}}});
      },
      {testing::leaf({2, 2})}));
}

TEST(IndexGrad, MaskedFill) {
  Tensor mask = from_vector(std::vector<bool>{true, false, false, true, false, true}, {2, 3});
  EXPECT_TRUE(testing::gradcheck([&](const auto& in) { return masked_fill(in[0], mask, 7.0); },
                                 {testing::leaf({2, 3})}));
  // x broadcast by the mask: its gradient sums over the broadcast dim.
  EXPECT_TRUE(testing::gradcheck([&](const auto& in) { return masked_fill(in[0], mask, 7.0); },
                                 {testing::leaf({3})}));
  // In place on a non-leaf.
  EXPECT_TRUE(testing::gradcheck(
      [&](const auto& in) {
        Tensor y = in[0] * 2.0;
        y.masked_fill_(mask, -1.0);
        return y;
      },
      {testing::leaf({2, 3})}));
}

TEST(IndexGrad, TrilTriu) {
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return tril(in[0], 1); }, {testing::leaf({3, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const auto& in) { return triu(in[0].transpose(1, 2), -1); },
                                 {testing::leaf({2, 3, 3})}));
}

// The scatter-style backward rows by name (what the fuzzer reached with
// dim -1 on gather_backward, whose kernel erased dimension -1 of the shape):
// attributes are checked like any op's.
TEST(IndexOps, ScatterBackwardRowsCheckTheirAttributes) {
  const Tensor idx = from_vector<int64_t>({1, 0}, {2});
  const Tensor g = ones({2, 3});
  const OpDef& isb = op("index_select_backward");
  const auto isb_attrs = [](int64_t dim, Shape shape) {
    return Attrs{{"dim", dim}, {"input_shape", shape}};
  };
  EXPECT_THROW((void)dispatch1(isb, {g, idx}, isb_attrs(2, {4, 3})), IndexError);
  EXPECT_THROW((void)dispatch1(isb, {g, idx}, isb_attrs(0, {4, 5})), ValueError);
  EXPECT_THROW((void)dispatch1(isb, {g, idx}, isb_attrs(0, {-4, 3})), ValueError);
  EXPECT_EQ(dispatch1(isb, {g, idx}, isb_attrs(-2, {4, 3})).shape(), (Shape{4, 3}));

  const OpDef& gab = op("gather_backward");
  const Tensor gidx = from_vector<int64_t>({0, 1, 1, 0}, {2, 2});
  const Tensor gg = ones({2, 2});
  const auto gab_attrs = [](int64_t dim, Shape shape) {
    return Attrs{{"dim", dim}, {"input_shape", shape}};
  };
  EXPECT_THROW((void)dispatch1(gab, {gg, gidx}, gab_attrs(-1, {})), ValueError);
  EXPECT_THROW((void)dispatch1(gab, {gg, gidx}, gab_attrs(3, {2, 2})), IndexError);
  EXPECT_THROW((void)dispatch1(gab, {ones({2, 3}), gidx}, gab_attrs(1, {2, 2})), ValueError);
  EXPECT_THROW((void)dispatch1(gab, {gg, gidx}, gab_attrs(1, {1, 2})), ValueError);
  EXPECT_THROW((void)dispatch1(gab, {gg, gidx}, gab_attrs(0, {1, 2})), IndexError);  // index 1 past size 1
  const Tensor r = dispatch1(gab, {gg, gidx}, gab_attrs(-1, {2, 2}));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
}

// tril/triu with a diagonal far past the matrix (found by the dispatch
// fuzzer: r + diagonal overflowed int64).
TEST(IndexOps, TriangleWithAnExtremeDiagonal) {
  const Tensor x = ones({2, 3});
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(tril(x, big).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(triu(x, big).to_vector<float>(), (std::vector<float>(6, 0.0f)));
  EXPECT_EQ(tril(x, -big).to_vector<float>(), (std::vector<float>(6, 0.0f)));
  EXPECT_EQ(triu(x, -big).to_vector<float>(), x.to_vector<float>());
}

}  // namespace
}  // namespace dtr
