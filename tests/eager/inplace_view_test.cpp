// In-place writes into views of tensors that take part in autograd (PyTorch's
// CopySlices), Note [views and in-place writes]: the base's history moves onto
// the write, the view's becomes a view of the base's, and other views made
// before the write regenerate theirs. Reference values: PyTorch 1.13.
#include <tuple>
#include <vector>

#include "tests/testing.h"

namespace dtr {
namespace {

using dtr::testing::allclose;
using dtr::testing::BudgetScope;
using dtr::testing::bitwise_equal;

// out = x + p; out[:2].relu_(); out.sum().backward() gives p its gradient:
// the count of elements of its column that the relu did not zero.
TEST(InPlaceOnView, ReluOfASliceGivesTheBaseItsGradient) {
  Tensor x = from_vector<float>({-1, 2, -3, 4, -5, 6}, {3, 2});
  Tensor p = from_vector<float>({0.5, 0.5}).requires_grad_();
  Tensor out = x + p;
  out.slice(0, 0, 2).relu_();
  EXPECT_EQ(out.grad_fn_name(), "CopySlices");
  EXPECT_TRUE(allclose(out, {0, 2.5, 0, 4.5, -4.5, 6.5}));
  out.sum().backward();
  EXPECT_TRUE(allclose(p.grad(), {1, 3}));
}

// Each kind of view, each kind of write; values from PyTorch 1.13:
//   w = [1, -2, 3, -4, 5, -6] (requires grad), h = (w * 2).view(2, 3)
//   0: h.select(0, 1).mul_(3)       1: h.narrow(1, 1, 2).add_(w.narrow(0, 4, 2) * w.narrow(0, 0, 2))
//   2: h.t().select(0, 2).relu_()   3: h.select(1, 0).masked_fill_(tensor([True, False]), 0)
//   4: h.view(6).slice(0, 1, 5, 2).copy_(w.slice(0, 0, 2) ** 2)
// then (h * h).sum().backward(). Case 5 adds a view of the same base
// (h.narrow(1, 1, 2).add_(h.select(0, 0).narrow(0, 0, 2))): the write reads
// the old values, as every in-place op here does (Note [mutation]); PyTorch's
// kernel reads some of the values it has already written there, so its
// answer depends on its loop order. Derived by hand: h = [[2, -2, 2],
// [-8, 12, -16]], dL/dw = 2 (2h + the sums of 2h over the written columns
// at h[0, 0:2]).
TEST(InPlaceOnView, EveryKindOfViewAndWrite) {
  const std::vector<std::vector<double>> expected = {
      {8, -16, 24, -288, 360, -432},
      {168, -212, 72, -32, 92, -72},
      {8, -16, 24, -32, 40, 0},
      {0, -16, 24, -32, 40, -48},
      {12, -32, 24, 0, 40, -48},
      {48, -64, 8, -32, 48, -64},
  };
  for (int c = 0; c < 6; ++c) {
    SCOPED_TRACE(c);
    Tensor w = from_vector<float>({1, -2, 3, -4, 5, -6}).requires_grad_();
    Tensor h = (w * 2.0).view({2, 3});
    if (c == 0) h.select(0, 1).mul_(3);
    if (c == 1) h.narrow(1, 1, 2).add_(w.narrow(0, 4, 2) * w.narrow(0, 0, 2));
    if (c == 2) h.t().select(0, 2).relu_();
    if (c == 3) h.select(1, 0).masked_fill_(from_vector<bool>({true, false}), 0);
    if (c == 4) h.view({6}).slice(0, 1, 5, 2).copy_(w.slice(0, 0, 2) * w.slice(0, 0, 2));
    if (c == 5) h.narrow(1, 1, 2).add_(h.select(0, 0).narrow(0, 0, 2));
    (h * h).sum().backward();
    EXPECT_TRUE(allclose(w.grad(), expected[size_t(c)])) << w.grad().str();
  }
}

// A preallocated buffer filled row by row (h.select(0, t).copy_(y)) trains
// like the same recurrence stacked out of place: same loss, same gradients.
struct Rnn {
  Tensor w, u, x, target;
  explicit Rnn(int64_t t, int64_t b, int64_t n) {
    manual_seed(7);
    w = (randn({n, n}) * 0.3).requires_grad_();
    u = (randn({n, n}) * 0.3).requires_grad_();
    x = randn({t, b, n});
    target = randn({t, b, n});
  }
  // The hidden states written into a buffer, or stacked.
  Tensor states(bool buffer) const {
    const int64_t t_len = x.shape()[0];
    Tensor h = zeros({x.shape()[1], x.shape()[2]});
    Tensor buf = zeros(x.shape());
    std::vector<Tensor> hs;
    for (int64_t t = 0; t < t_len; ++t) {
      // Named, so that every compiler runs the two products in one order
      // (the operands of + are unsequenced; the budgeted test depends on it).
      Tensor hu = matmul(h, u);
      Tensor xw = matmul(x.select(0, t), w);
      h = tanh(xw + hu);
      if (buffer) buf.select(0, t).copy_(h);
      else hs.push_back(h);
    }
    return buffer ? buf : stack(hs);
  }
  std::tuple<Tensor, Tensor, Tensor> grads(bool buffer) {
    w.set_grad(Tensor());
    u.set_grad(Tensor());
    Tensor loss = (states(buffer) * target).sum();
    loss.backward();
    return {loss.detach(), w.grad(), u.grad()};
  }
};

TEST(InPlaceOnView, BufferFilledRowByRowTrainsLikeStack) {
  Rnn rnn(6, 3, 4);
  auto [loss_b, gw_b, gu_b] = rnn.grads(/*buffer=*/true);
  auto [loss_s, gw_s, gu_s] = rnn.grads(/*buffer=*/false);
  EXPECT_TRUE(bitwise_equal(loss_b, loss_s));
  EXPECT_TRUE(bitwise_equal(gw_b, gw_s));
  EXPECT_TRUE(bitwise_equal(gu_b, gu_s));
  // And it trains: a few SGD steps lower the loss.
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    auto [loss, gw, gu] = rnn.grads(true);
    (step == 0 ? first : last) = loss.item<double>();
    NoGradGuard no_grad;
    rnn.w.sub_(gw * 0.05);
    rnn.u.sub_(gu * 0.05);
  }
  EXPECT_LT(last, first);
}

// Note [mutation] under a budget of 0.8 of the unlimited peak: the states,
// the buffer written through views and its older versions are evicted and
// rematerialized between the writes and backward; the loss and gradients are
// bitwise those of the unlimited run.
TEST(InPlaceOnView, BufferEvictedBetweenWriteAndBackwardGivesTheSameGradients) {
  Rnn rnn(16, 64, 256);  // the buffer is 1 MiB, each step's temporaries 64 KiB
  remat::reset_stats();
  auto [loss0, gw0, gu0] = rnn.grads(true);
  const int64_t peak = remat::stats().peak_bytes;
  remat::reset_stats();
  std::tuple<Tensor, Tensor, Tensor> budgeted;
  {
    BudgetScope budget(peak * 8 / 10);
    budgeted = rnn.grads(true);
  }
  EXPECT_GT(remat::stats().evictions, 0);
  EXPECT_GT(remat::stats().rematerializations, 0);
  EXPECT_TRUE(bitwise_equal(std::get<0>(budgeted), loss0));
  EXPECT_TRUE(bitwise_equal(std::get<1>(budgeted), gw0));
  EXPECT_TRUE(bitwise_equal(std::get<2>(budgeted), gu0));
}

// The writes PyTorch refuses, with its reasons; nothing is written.
TEST(InPlaceOnView, RefusedWritesAreTypedErrors) {
  Tensor w = from_vector<float>({1, 2, 3, 4}).requires_grad_();
  // A view of a leaf that requires grad.
  EXPECT_THROW(w.slice(0, 0, 2).add_(1.0), ValueError);
  EXPECT_TRUE(allclose(w.detach(), {1, 2, 3, 4}));
  // An output of an op that returns several views.
  Tensor h = w * 1.0;
  std::vector<Tensor> parts = split(h, 2);
  EXPECT_THROW(parts[0].mul_(2), ValueError);
  EXPECT_TRUE(allclose(h.detach(), {1, 2, 3, 4}));
  // A view made in no_grad mode of a base that requires grad.
  Tensor v;
  {
    NoGradGuard no_grad;
    v = h.view({2, 2});
  }
  EXPECT_THROW(v.mul_(2), ValueError);
  // ...which under no_grad may be written (an update outside the graph).
  {
    NoGradGuard no_grad;
    v.mul_(2);
  }
  EXPECT_TRUE(allclose(h.detach(), {2, 4, 6, 8}));
  // A write into an expanded tensor (one element at several places).
  Tensor e = zeros({1, 4}).expand({3, 4});
  EXPECT_THROW(e.add_(1.0), ValueError);
  EXPECT_TRUE(allclose(e, std::vector<double>(12, 0.0)));
}

}  // namespace
}  // namespace dtr
