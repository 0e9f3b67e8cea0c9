// Tensor::index / index_put_ with torch::indexing's names (eager/indexing.h):
// libtorch's spelling of Python's x[...] (tests/python/test_habits_tensor.py
// checks the same code against PyTorch through __getitem__/__setitem__).
#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using namespace dtr::indexing;

// x = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
Tensor grid() { return arange(12, kFloat32).reshape({3, 4}); }

std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector<float>(); }

TEST(Indexing, BasicIndicesAreViews) {
  Tensor x = grid();
  Tensor col = x.index({Slice(), 0});  // x[:, 0]
  EXPECT_EQ(col.shape(), (Shape{3}));
  EXPECT_EQ(values(col), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(col.storage(), x.storage());
  EXPECT_EQ(values(x.index({-1, Slice(None, None, 2)})), (std::vector<float>{8, 10}));  // x[-1, ::2]
  EXPECT_EQ(x.index({"...", Slice(-2, None)}).shape(), (Shape{3, 2}));                  // x[..., -2:]
  EXPECT_EQ(x.index({None, Slice(1, None), Ellipsis}).shape(), (Shape{1, 2, 4}));       // x[None, 1:, ...]
  EXPECT_EQ(x.index({true}).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(x.index({false}).shape(), (Shape{0, 3, 4}));
}

TEST(Indexing, AdvancedIndicesFollowPyTorch) {
  Tensor x = grid();
  // x[:, [-1]] keeps the dim; negative positions count from the end.
  Tensor last = x.index({Slice(), from_vector<int64_t>({-1})});
  EXPECT_EQ(last.shape(), (Shape{3, 1}));
  EXPECT_EQ(values(last), (std::vector<float>{3, 7, 11}));
  // x[rows, cols] pairs the indices (broadcast together).
  Tensor rows = from_vector<int64_t>({0, 2}), cols = from_vector<int64_t>({1, 3});
  EXPECT_EQ(values(x.index({rows, cols})), (std::vector<float>{1, 11}));
  // x[rows[:, None], cols] broadcasts to (2, 2).
  EXPECT_EQ(values(x.index({rows.index({Slice(), None}), cols})), (std::vector<float>{1, 3, 9, 11}));
  // x[x > 6]: a bool mask selects in row-major order.
  EXPECT_EQ(values(x.index({x > 6.0})), (std::vector<float>{7, 8, 9, 10, 11}));
  // Separated advanced indices put their dims first: (3, 4, 5)[idx, :, idx] → (2, 4).
  Tensor cube = arange(60, kFloat32).reshape({3, 4, 5});
  Tensor sep = cube.index({rows, Slice(), from_vector<int64_t>({1, 4})});
  EXPECT_EQ(sep.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(sep.index({Slice(), 0})), (std::vector<float>{1, 44}));
  // Adjacent ones stay in place: (3, 4, 5)[:, idx, idx] → (3, 2).
  EXPECT_EQ(cube.index({Slice(), rows, cols}).shape(), (Shape{3, 2}));
}

TEST(Indexing, ErrorsNameTheDimTheSizeAndTheIndex) {
  Tensor x = grid();
  EXPECT_TRUE(testing::throws_with<IndexError>([&] { x.index({Slice(), 4}); },
                                              {"index 4 is out of bounds for dimension 1 with size 4"}));
  EXPECT_TRUE(testing::throws_with<IndexError>(
      [&] { x.index({from_vector<int64_t>({-4})}); }, {"index -4", "dimension 0 with size 3"}));
  EXPECT_TRUE(testing::throws_with<IndexError>([&] { x.index({0, 0, 0}); },
                                              {"too many indices for tensor of dimension 2"}));
  EXPECT_TRUE(testing::throws_with<IndexError>([&] { x.index({Ellipsis, "..."}); },
                                              {"single ellipsis"}));
  EXPECT_TRUE(testing::throws_with<IndexError>(
      [&] { x.index({from_vector<bool>({true, false})}); }, {"shape of the mask [2]"}));
  EXPECT_TRUE(testing::throws_with<ValueError>([&] { x.index({Slice(None, None, 0)}); },
                                              {"step must be greater than zero"}));
}

TEST(Indexing, IndexPutWritesInPlace) {
  Tensor x = grid();
  const auto* storage = x.storage().get();
  x.index_put_({x > 8.0}, 0.0);                                    // x[x > 8] = 0
  x.index_put_({Slice(), from_vector<int64_t>({0, -1})}, -1.0);    // x[:, [0, -1]] = -1
  x.index_put_({1}, from_vector<float>({5, 5, 5, 5}));              // x[1] = tensor
  x.index_put_({from_vector<int64_t>({2, 2}), from_vector<int64_t>({1, 2})},
               from_vector<float>({7, 8}));                          // x[[2, 2], [1, 2]] = [7, 8]
  EXPECT_EQ(x.storage().get(), storage);
  EXPECT_EQ(values(x), (std::vector<float>{-1, 1, 2, -1, 5, 5, 5, 5, -1, 7, 8, -1}));
  EXPECT_TRUE(testing::throws_with<ValueError>(
      [&] { x.index_put_({from_vector<int64_t>({0})}, from_vector<float>({1, 2, 3})); },
      {"cannot be broadcast"}));
}

// PyTorch drops an assigned value's leading size-1 dims before broadcasting
// it (t[0] = ones(1, 4) writes a row); libtorch's index_put_ does the same.
TEST(Indexing, AssignedValuesLoseTheirLeadingUnitDims) {
  Tensor x = grid();
  x.index_put_({0}, full({1, 1, 4}, 9.0));                                // x[0] = ones(1, 1, 4) * 9
  x.index_put_({from_vector<int64_t>({2})}, full({1, 1, 4}, 7.0));        // x[[2]] = (1, 1, 4)
  x.index_put_({1, 2}, full({1}, 5.0));                                   // x[1, 2] = tensor([5])
  x.index_put_({x < 5.0}, full({1}, -2.0));                               // x[x < 5] = tensor([-2])
  EXPECT_EQ(values(x), (std::vector<float>{9, 9, 9, 9, -2, 5, 5, 7, 7, 7, 7, 7}));
  // Only size-1 dims go: (2, 4) into a row is still an error.
  EXPECT_TRUE(testing::throws_with<ValueError>([&] { x.index_put_({0}, full({2, 4}, 1.0)); },
                                               {"cannot be broadcast"}));
}

TEST(Indexing, GradientsFlowThroughReadsAndWrites) {
  Tensor x = grid().requires_grad_();
  Tensor y = x * 1.0;
  Tensor picked = x.index({from_vector<int64_t>({0, 0, 2})});  // rows 0, 0, 2
  y.index_put_({y > 8.0}, 0.0);                                 // after the read: still valid
  y.index_put_({Slice(), 1}, picked.index({0, Slice(0, 3)}));  // y[:, 1] = x[0, :3]
  (y.sum() + picked.sum()).backward();
  // d/dx (PyTorch 1.13 gives the same): y keeps x where not overwritten (x <= 8,
  // column 1 excluded), x[0, :3]
  // feeds column 1 once each, and picked reads row 0 twice and row 2 once.
  EXPECT_EQ(values(x.grad()), (std::vector<float>{4, 3, 4, 3, 1, 0, 1, 1, 2, 1, 1, 1}));
}

TEST(Indexing, UnderABudgetTheResultsAreBitwiseEqual) {
  auto run = [](std::optional<int64_t> budget) {
    manual_seed(5);
    Tensor w = randn({128, 128}).requires_grad_();
    remat::set_memory_budget(budget);
    Tensor h = w;
    for (int i = 0; i < 5; ++i) {
      h = matmul(h, w).tanh();
      h = h.index({Slice(), arange(127, -1, -1)});
      h = h * 1.0;
      h.index_put_({h > 0.5}, 0.5);
      h.index_put_({Slice(), from_vector<int64_t>({0, -1})}, h.index({Slice(), from_vector<int64_t>({1, -2})}) * 0.5);
    }
    Tensor loss = (h * h).sum();
    loss.backward();
    std::vector<float> out = w.grad().to_vector<float>();
    out.push_back(loss.item<float>());
    const remat::Stats s = remat::stats();
    remat::set_memory_budget(std::nullopt);
    return std::make_pair(out, s);
  };
  remat::reset_stats();
  const auto [free, free_stats] = run(std::nullopt);
  remat::reset_stats();
  const auto [tight, tight_stats] = run(free_stats.peak_bytes * 8 / 10);
  EXPECT_GT(tight_stats.evictions, 0);
  ASSERT_EQ(free.size(), tight.size());
  EXPECT_EQ(std::memcmp(free.data(), tight.data(), free.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace dtr
